"""Durable per-item results: the within-job checkpoint and the cross-run item cache.

A store is a directory of append-only JSONL files, one per writer (a job).
Each record carries `key`, a hash of everything that determines the item's
result, so a record can be reused by any later job with the same key, whatever
the shard layout. Records are appended and fsynced once per batch; a job
killed mid-write leaves at most a torn last line, which readers skip and the
next writer cuts off. Snakemake never sees these files as outputs, so it does
not delete them when a job fails.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def item_key(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _read_complete_lines(path: Path):
    with open(path, "rb") as fh:
        data = fh.read()
    end = data.rfind(b"\n")
    for line in data[: end + 1].splitlines():
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


class ItemStore:
    def __init__(self, directory: str | os.PathLike, writer: str):
        self.directory = Path(directory)
        self.path = self.directory / f"{writer}.jsonl"

    def load(self, wanted: set[str] | None = None) -> dict[str, dict]:
        """All complete records in the store (optionally only the `wanted` keys)."""
        found: dict[str, dict] = {}
        if not self.directory.is_dir():
            return found
        # Our own file last, so that its records win over older writers'.
        files = sorted(p for p in self.directory.glob("*.jsonl") if p != self.path)
        if self.path.exists():
            files.append(self.path)
        for path in files:
            for rec in _read_complete_lines(path):
                key = rec.get("key")
                if key and (wanted is None or key in wanted):
                    found[key] = rec
        return found

    def _cut_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                fh.truncate(end)

    def append(self, records: list[dict]) -> None:
        if not records:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
