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


def check_model(name: str, role: str, buildable: bool = False) -> None:
    """Raise InputError when a local model path does not hold a checkpoint that loads: its
    config.json, a tokenizer and its weights (every shard its index names).

    `buildable` marks demo models the workflow builds itself when missing.
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
        missing = missing_files(name)
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
