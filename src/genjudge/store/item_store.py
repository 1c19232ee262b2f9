"""Durable per-item results: the within-job checkpoint and the cross-run item cache.

Each record carries `key`, a hash of everything that determines the item's
result, so a record can be reused by any later job with the same key, whatever
the shard layout. Snakemake never sees these files as outputs, so it does not
delete them when a job fails.

Layout of a store directory:

    logs/<token>.jsonl    records, appended by one writer only; first line names it
    keys/<xyz>/<key>      a symbolic link per key: "<token>:<offset>:<length>"

Appending writes the batch to the writer's log, fsyncs it (once per batch),
then links each key to its bytes: O(1) per record whatever the store holds.
A lookup reads one link and one record per wanted key, never another key's
record. bench/store_bench.py: from 10k to 1M records stored, an append costs
the same per record and a lookup about twice as much per key (the link's
inode is less often cached), where the old layout, one JSONL file per writer
read whole, grew ~100x. A writer's log is its own: the token is random per
ItemStore, so a leftover job and its resubmission (even on the same host with
the same pid) never write the same file. A job killed mid-write leaves at most
a torn tail in its own log, which no link points to (links are made only after
the bytes are on disk); a link is created or replaced atomically, so no reader
ever sees half of one. Two runs on one cache may link the same key at once: the
later link wins, and both records are valid.

Durability: the records are on disk when append returns; their links are
not fsynced one directory at a time (that more than doubled a batch's cost). On
ext4 and XFS the next fsync commits the journal that holds them, so a power cut
loses at most the last batch's links; NFS servers commit a link before the call
returns. A lost link means its item is computed again, never a wrong record.

Why not SQLite: the cache usually lives in the workflow directory, which on a
cluster is a network filesystem shared by jobs on many nodes. SQLite's WAL mode
does not work across hosts (its index is shared memory), and its rollback mode
relies on POSIX locks that NFS and Lustre implement unreliably or only per node,
which corrupts a database silently. This layout needs no lock at all: one
writer per log, and atomic creation and rename of links, which network
filesystems do provide; a reader opens a log only after seeing a link to it, so
close-to-open consistency shows it the linked bytes. The cost is one inode per
key (a short link target is kept in the inode, with no data block): count it
against inode quotas on cluster filesystems (bench/store_bench.py measures).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import time
from pathlib import Path

_SAFE_KEY = re.compile(r"[0-9A-Za-z_-]{1,128}")


def item_key(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _link_name(key: str) -> str:
    return key if _SAFE_KEY.fullmatch(key) else hashlib.sha256(key.encode("utf-8")).hexdigest()


def _bucket(name: str) -> str:
    # 4096 directories: ~250 links each at a million keys.
    return hashlib.blake2s(name.encode(), digest_size=2).hexdigest()[:3]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ItemStore:
    def __init__(self, directory: str | os.PathLike, writer: str):
        self.directory = Path(directory)
        self.writer = writer
        self.token = secrets.token_hex(8)
        self.log_path = self.directory / "logs" / f"{self.token}.jsonl"
        self._keys = os.path.join(self.directory, "keys")
        self._logs = os.path.join(self.directory, "logs")
        self._fd: int | None = None
        self._offset = 0

    # --- reading ------------------------------------------------------------------------------

    def _link_path(self, key: str) -> str:
        name = _link_name(key)
        return f"{self._keys}/{_bucket(name)}/{name}"

    def load(self, wanted: set[str] | None = None) -> dict[str, dict]:
        """The stored record of each `wanted` key that has one (all records when None)."""
        found: dict[str, dict] = {}
        if not self.directory.is_dir():
            return found
        logs: dict[str, int | None] = {}
        try:
            if wanted is None:
                for link in self._all_links():
                    rec = self._read(link, None, logs)
                    if rec is not None:
                        found[rec["key"]] = rec
            else:
                for key in wanted:
                    rec = self._read(self._link_path(key), key, logs)
                    if rec is not None:
                        found[key] = rec
        finally:
            for fd in logs.values():
                if fd is not None:
                    os.close(fd)
        return found

    def _all_links(self):
        keys = self.directory / "keys"
        if not keys.is_dir():
            return
        for bucket in os.scandir(keys):
            if bucket.is_dir(follow_symlinks=False):
                for entry in os.scandir(bucket.path):
                    if not entry.name.startswith("."):
                        yield entry.path

    def _read(self, link: str, key: str | None, logs: dict[str, int | None]) -> dict | None:
        """The record `link` points to, or None when it is missing or does not hold `key`."""
        try:
            token, offset, length = os.readlink(link).split(":")
            offset, length = int(offset), int(length)
        except (OSError, ValueError):
            return None
        if token not in logs:
            try:
                logs[token] = os.open(f"{self._logs}/{token}.jsonl", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                logs[token] = None  # its log was deleted: the item is computed again
        fd = logs[token]
        if fd is None:
            return None
        data = os.pread(fd, length, offset)
        if len(data) != length:
            return None
        try:
            rec = json.loads(data)
        except ValueError:
            return None
        if not isinstance(rec, dict) or "key" not in rec or (key is not None and rec["key"] != key):
            return None
        return rec

    # --- writing ------------------------------------------------------------------------------

    def _open_log(self) -> int:
        if self._fd is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            header = (
                json.dumps(
                    {
                        "log": {
                            "writer": self.writer,
                            "host": socket.gethostname(),
                            "pid": os.getpid(),
                            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        }
                    }
                )
                + "\n"
            )
            _write_all(fd, header.encode())
            self._fd, self._offset = fd, len(header.encode())
            _fsync_dir(self.log_path.parent)
        return self._fd

    def append(self, records: list[dict]) -> None:
        """Store `records` (each with a `key`) durably: on disk, data and links, when this returns."""
        if not records:
            return
        fd = self._open_log()
        lines = [json.dumps(r, ensure_ascii=False, sort_keys=True).encode("utf-8") for r in records]
        _write_all(fd, b"".join(line + b"\n" for line in lines))
        os.fsync(fd)  # the bytes are on disk before any link points to them
        offset = self._offset
        for rec, line in zip(records, lines):
            self._link(rec["key"], f"{self.token}:{offset}:{len(line)}")
            offset += len(line) + 1
        self._offset = offset

    def _link(self, key: str, target: str) -> None:
        path = self._link_path(key)
        try:
            os.symlink(target, path)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._link(key, target)
        except FileExistsError:
            # An earlier record of this key (another run, or a log since deleted): the new one wins.
            head, name = os.path.split(path)
            tmp = f"{head}/.{name}.{self.token}"
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            os.symlink(target, tmp)
            os.replace(tmp, path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def count_records(directory: str | os.PathLike) -> int:
    """Records appended to the store so far, repeats of a key included (complete lines of every log)."""
    n = 0
    for log in (Path(directory) / "logs").glob("*.jsonl"):
        with open(log, "rb") as fh:
            n += max(0, fh.read().count(b"\n") - 1)  # less the header line
    return n


def count_keys(directory: str | os.PathLike) -> int:
    """Keys the store holds a record for."""
    return len(ItemStore(directory, "count").load())
