"""Hugging Face `datasets` as a dataset source: a hub id, a `save_to_disk` directory, or a
directory of data files, loaded through the `datasets` library.

A hub id is read from the library's cache when it is there and the Hub cannot be reached
(or `HF_HUB_OFFLINE=1` is set, which skips the attempt); one that is neither on the Hub nor
in the cache stops with the id named. `datasets` is imported only when such a dataset is used.
"""

from __future__ import annotations

import re
from pathlib import Path

from genjudge.errors import InputError

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def _label(path: str, config_name, split) -> str:
    parts = [f"config {config_name!r}" if config_name else "", f"split {split!r}" if split else ""]
    parts = [p for p in parts if p]
    return f"{path} ({', '.join(parts)})" if parts else path


def _pick_split(loaded, path: str, config_name, split):
    """The one Dataset asked for: `split`, or the only split there is."""
    import datasets

    if isinstance(loaded, datasets.Dataset):
        return loaded, split
    names = list(loaded.keys())
    if split is None:
        if len(names) != 1:
            raise InputError(
                f"{_label(path, config_name, None)}: has the splits {', '.join(names)}; choose one with dataset.hf.split"
            )
        split = names[0]
    if split not in loaded:
        raise InputError(f"{_label(path, config_name, split)}: no split {split!r}; it has {', '.join(names) or 'none'}")
    return loaded[split], split


def _load(path: str, config_name, split, what: str, load):
    try:
        return load()
    except InputError:
        raise
    except Exception as exc:  # the library raises many types: not found, offline, unknown config or split
        message = str(exc).strip().replace("\n", " ")
        advice = ""
        if isinstance(exc, ConnectionError) or "offline" in message.lower() or "couldn't reach" in message.lower():
            advice = (
                "; it is not in the local Hugging Face cache and the Hub cannot be reached: load it once "
                "on a machine with network access into the same cache (HF_HOME, or dataset.hf.cache_dir), "
                "then run here with HF_HUB_OFFLINE=1"
            )
        raise InputError(
            f"{_label(path, config_name, split)}: cannot load {what} ({type(exc).__name__}: {message}){advice}"
        ) from None


def read_hf_rows(path: str, options: dict) -> tuple[str, list[tuple[str, dict]]]:
    """The source's name for messages and its rows as plain Python values, labelled 'row N'.

    `options` is `dataset.hf`: `config` (a hub dataset's configuration/subset), `split`
    (`test`; a hub id also takes slices such as `test[:100]`), `revision` (a hub
    branch, tag or commit) and `cache_dir` (null: the library's own, under HF_HOME).
    """
    config_name, split = options.get("config"), options.get("split")
    revision, cache_dir = options.get("revision"), options.get("cache_dir")
    local = Path(path).expanduser()
    if local.is_dir():
        import datasets

        if (local / "dataset_dict.json").is_file() or (local / "state.json").is_file():
            for key, value in (("config", config_name), ("revision", revision)):
                if value is not None:
                    raise InputError(
                        f"dataset.hf.{key}: {path} is a directory written by save_to_disk, which has "
                        f"no {key}; set dataset.hf.{key} to null"
                    )
            loaded = _load(path, None, split, "the dataset saved there", lambda: datasets.load_from_disk(str(local)))
        else:
            loaded = _load(
                path,
                config_name,
                split,
                "the data files there",
                lambda: datasets.load_dataset(str(local), config_name, split=split, cache_dir=cache_dir),
            )
    elif local.exists():
        raise InputError(
            f"{path}: a Hugging Face dataset is a hub id or a directory, not a file; set "
            "dataset.format to the file's format (or auto)"
        )
    elif _HUB_ID.fullmatch(path):
        import datasets

        loaded = _load(
            path,
            config_name,
            split,
            "the Hugging Face dataset",
            lambda: datasets.load_dataset(path, config_name, split=split, revision=revision, cache_dir=cache_dir),
        )
    else:
        raise InputError(
            f"{path}: dataset not found (no such directory, and not a Hugging Face hub id such as `owner/name`)"
        )
    dataset, split = _pick_split(loaded, path, config_name, split)
    rows = dataset.with_format(None).to_list()
    return _label(path, config_name, split), [(f"row {i}", row) for i, row in enumerate(rows)]
