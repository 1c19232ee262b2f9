"""Where a model comes from (local directory or Hugging Face id) and its fingerprint.

Nothing here imports torch or loads weights: these checks run while Snakemake
plans the workflow, so a wrong model path stops the run before any job starts.

The fingerprint of a local checkpoint covers every byte of its files. Files up to
64 MiB are read on every call; a larger file enters by its full SHA-256, computed
once per version of the file and kept in a `DigestIndex` (by path, size, mtime,
ctime, inode and device: any write, even one that restores the mtime, changes the
ctime), or read off its name when the file is a link into a Hugging Face hub
cache's `blobs/`, where large (LFS) files are stored under their SHA-256. The name is trusted
while the blob keeps the byte count, mtime, ctime and inode it had when the index first saw it: a
write through the snapshot's link (rare, but it changes the bytes and not the name), even one that
restores the mtime (`cp -p`, `rsync -t`), makes the file enter by its bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from pathlib import Path

from genjudge.errors import InputError

_SMALL_FILE = 64 * 1024 * 1024
_HUB_BLOB = re.compile(r"[0-9a-f]{64}")  # an LFS blob's name in a hub cache: its SHA-256
DIGESTS_DIR = "file-digests"  # under cache_dir, beside the item stores


def looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or os.path.isdir(os.path.expanduser(name))


def config_path(model: str, revision: str | None = None) -> Path | None:
    """The config file a model is planned from, without loading anything: `config.json` of a local
    directory, a `.json` file named directly, or `config.json` in the local Hugging Face cache;
    None where none is found here (never downloads)."""
    path = Path(os.path.expanduser(model))
    if path.is_dir():
        f = path / "config.json"
        return f if f.is_file() else None
    if path.suffix == ".json":
        return path if path.is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - the hub client ships with transformers
        return None
    try:
        hit = try_to_load_from_cache(model, "config.json", revision=revision)
    except ValueError:  # not a hub id either (the hub client's validation error)
        return None
    return Path(hit) if isinstance(hit, str) else None


# Files a tokenizer is loaded from (any one): fast tokenizers, sentencepiece, BPE vocabularies.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt", "tekken.json")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def is_local(name: str) -> bool:
    return looks_like_path(name) or (os.sep in name and name.count("/") != 1)


def missing_files(name: str) -> str | None:
    """What a local model directory lacks to be loaded (tokenizer, weights, shards its index names),
    in words, or None (complete, or not a local directory)."""
    if not name:
        return None
    path = Path(os.path.expanduser(name))
    if not is_local(name) or not path.is_dir():
        return None
    missing = []
    if not (path / "config.json").exists():
        missing.append("no config.json")
    if not any((path / f).exists() for f in TOKENIZER_FILES) and not any(path.glob("*.tiktoken")):
        missing.append(f"no tokenizer (none of {', '.join(TOKENIZER_FILES)})")
    index = next((path / i for i in WEIGHT_INDEXES if (path / i).exists()), None)
    if index is not None:
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError) as exc:
            missing.append(f"an unreadable {index.name} ({exc})")
        else:
            gone = [s for s in shards if not (path / s).exists()]
            if gone:
                missing.append(
                    f"{len(gone)} of the {len(shards)} weight files {index.name} lists missing "
                    f"({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''})"
                )
    elif not any(path.glob("*.safetensors")) and not any(path.glob("pytorch_model*.bin")):
        missing.append("no weights (no *.safetensors, no pytorch_model*.bin)")
    return ", ".join(missing) or None


def check_model(name: str, role: str, buildable: bool = False, loadable: bool = True) -> None:
    """Raise InputError when a local model path does not hold a checkpoint that loads: its
    config.json, a tokenizer and its weights (every shard its index names).

    `buildable` marks demo models the workflow builds itself when missing. `loadable=False` asks
    for config.json only: what planning reads (a dry run on a login node, which holds the configs
    and not the weights); the rest is checked before a real run's first job, and by the job.
    Hub ids are resolved by transformers in the job (HF_HUB_OFFLINE is honoured).
    """
    if buildable:
        return
    if is_local(name):
        path = Path(os.path.expanduser(name))
        if not path.is_dir():
            raise InputError(f"{role}.model: model directory {name!r} does not exist")
        if not (path / "config.json").exists():
            raise InputError(f"{role}.model: {name!r} has no config.json; is it a transformers checkpoint?")
        missing = missing_files(name) if loadable else None
        if missing:
            raise InputError(
                f"{role}.model: {name!r} has {missing}: the job could not load it; copy the whole "
                "checkpoint there (e.g. `hf download ORG/NAME --local-dir DIR`)"
            )
        return
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - hub client ships with transformers
            return
        hit = try_to_load_from_cache(name, "config.json")
        if not isinstance(hit, str):
            raise InputError(
                f"{role}.model: {name!r} is neither a local directory nor in the local "
                f"Hugging Face cache, and HF_HUB_OFFLINE=1 forbids downloading it; `hf download {name}` "
                "fetches it into the cache"
            )


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hub_blob_sha256(path: Path) -> str | None:
    """The SHA-256 a hub cache names a large file's blob by, for a snapshot's link to it."""
    if not path.is_symlink():
        return None
    target = path.resolve()
    return target.name if target.parent.name == "blobs" and _HUB_BLOB.fullmatch(target.name) else None


class DigestIndex:
    """The full SHA-256 of large files, computed once per version of a file.

    One entry per (real path, size, mtime, ctime, inode, device): a symbolic link
    `<dir>/<xy>/<key>` whose target is the digest, created under a temporary name and
    renamed, as the item store links its keys. Concurrent writers (several snakemake
    processes planning at once, jobs on other nodes) need no lock: a reader sees a
    whole link or none, and two writers of one key write the same digest. Entries of
    old versions stay behind (one inode each). A file changed less than
    `settle_seconds` before it was read is hashed but not recorded: on a filesystem
    with coarse timestamps a second write within the same tick would keep its stat.
    `directory` None: nothing is kept, every call hashes.
    """

    def __init__(self, directory: str | os.PathLike | None, settle_seconds: float = 2.0):
        self.directory = None if directory is None else Path(directory)
        self.settle_seconds = settle_seconds

    @staticmethod
    def _stat_key(path: Path, st: os.stat_result) -> str:
        ident = [os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        return hashlib.sha256(json.dumps(ident).encode()).hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def sha256(self, path: Path) -> str:
        """The file's SHA-256: from the index when this version of it is there, else computed (and kept)."""
        before = os.stat(path)
        key = self._stat_key(path, before)
        if self.directory is not None:
            try:
                digest = os.readlink(self._entry(key))
                if _HUB_BLOB.fullmatch(digest):
                    return digest
            except OSError:
                pass
        digest = _file_sha256(path)
        settled = time.time() - max(before.st_mtime_ns, before.st_ctime_ns) / 1e9 >= self.settle_seconds
        if self.directory is not None and settled and self._stat_key(path, os.stat(path)) == key:
            self._record(key, digest)
        return digest

    def blob_sha256(self, path: Path) -> str | None:
        """For a snapshot's link to a hub blob: the blob's SHA-256, its name while it keeps the byte
        count, mtime, ctime and inode it had when first seen here, its bytes' once it changed; None for
        other files. Without a directory nothing was seen before: the name is taken."""
        name = hub_blob_sha256(path)
        if name is None or self.directory is None:
            return name
        target = path.resolve()
        st = os.stat(target)
        seen = f"{name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"
        key = hashlib.sha256(json.dumps(["hub blob", str(target)]).encode()).hexdigest()
        try:
            first = os.readlink(self._entry(key))
        except OSError:
            self._record(key, seen)
            return name
        if first == f"{name}:{st.st_size}:{st.st_mtime_ns}":  # kept before ctime and inode were: kept again, once
            self._record(key, seen)
            return name
        return name if first == seen else self.sha256(target)

    def _record(self, key: str, digest: str) -> None:
        entry = self._entry(key)
        tmp = entry.parent / f".{key}.{secrets.token_hex(6)}"
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(digest, tmp)
            os.replace(tmp, entry)
        except OSError:  # a read-only cache: the digest is still right, only not kept
            if os.path.lexists(tmp):
                os.unlink(tmp)


def digest_index(cache_dir: str | os.PathLike) -> DigestIndex:
    """The index of large files' digests under the config's `cache_dir`."""
    return DigestIndex(Path(cache_dir) / DIGESTS_DIR)


def _hash_file(h, path: Path, digests: DigestIndex) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}:{size}".encode())
    if size <= _SMALL_FILE:
        h.update(path.read_bytes())
    else:  # weight shards: by their full SHA-256, from the hub blob's name or the index
        h.update(b"sha256:" + (digests.blob_sha256(path) or digests.sha256(path)).encode())


def fingerprint(name: str, revision: str | None = None, digests: DigestIndex | None = None) -> str:
    """A short hash that changes when any byte of the checkpoint or its tokenizer changes.

    `digests` keeps large files' SHA-256 between calls (`digest_index(config["cache_dir"])`);
    without it every large file is read in full each time."""
    h = hashlib.sha256()
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        digests = digests or DigestIndex(None)
        for child in sorted(path.rglob("*")):
            if child.is_file() and not child.name.startswith("."):
                _hash_file(h, child, digests)
    else:
        resolved = revision or "main"
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(name, "config.json", revision=revision)
            if isinstance(hit, str):  # .../snapshots/<commit>/config.json: the commit names every file
                resolved = Path(hit).parent.name
        except ImportError:  # pragma: no cover
            pass
        h.update(json.dumps([name, resolved]).encode())
    return h.hexdigest()[:16]
