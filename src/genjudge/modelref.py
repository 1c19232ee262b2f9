"""Where a model comes from (local directory or Hugging Face id) and its fingerprint.

Nothing here imports torch or loads weights: these checks run while Snakemake
plans the workflow, so a wrong model path stops the run before any job starts.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from genjudge.errors import InputError

_SMALL_FILE = 64 * 1024 * 1024
_EDGE = 1024 * 1024


def looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or os.path.isdir(os.path.expanduser(name))


def check_model(name: str, role: str, buildable: bool = False) -> None:
    """Raise InputError when a local model path does not hold a checkpoint.

    `buildable` marks demo models the workflow builds itself when missing.
    Hub ids are resolved by transformers in the job (HF_HUB_OFFLINE is honoured).
    """
    if buildable:
        return
    if looks_like_path(name) or (os.sep in name and name.count("/") != 1):
        path = Path(os.path.expanduser(name))
        if not path.is_dir():
            raise InputError(f"{role}.model: model directory {name!r} does not exist")
        if not (path / "config.json").exists():
            raise InputError(f"{role}.model: {name!r} has no config.json; is it a transformers checkpoint?")
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
                "Hugging Face cache, and HF_HUB_OFFLINE=1 forbids downloading it"
            )


def _hash_file(h, path: Path) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}:{size}".encode())
    with open(path, "rb") as fh:
        if size <= _SMALL_FILE:
            h.update(fh.read())
        else:  # huge weight shards: size + both ends is enough to tell checkpoints apart
            h.update(fh.read(_EDGE))
            fh.seek(size - _EDGE)
            h.update(fh.read(_EDGE))


def fingerprint(name: str, revision: str | None = None) -> str:
    """A short hash that changes when the checkpoint or its tokenizer changes."""
    h = hashlib.sha256()
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        for child in sorted(path.rglob("*")):
            if child.is_file() and not child.name.startswith("."):
                _hash_file(h, child)
    else:
        resolved = revision or "main"
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(name, "config.json", revision=revision)
            if isinstance(hit, str):  # .../snapshots/<commit>/config.json
                resolved = Path(hit).parent.name
        except ImportError:  # pragma: no cover
            pass
        h.update(json.dumps([name, resolved]).encode())
    return h.hexdigest()[:16]
