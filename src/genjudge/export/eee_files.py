"""Every Eval Ever's files, laid out as its datastore lays them out:
`data/<collection>/<developer>/<model>/<uuid>.json` (the aggregate) with `<uuid>_samples.jsonl` (its
instances) beside it; here under `results/<run>/export/eee/`, the collection being the dataset's name.

Names and bytes depend only on the results: the file's uuid is drawn from the evaluation's id, records
are written with sorted keys, and a file whose bytes would not change is not written again (an
aggregate's `retrieved_timestamp`, the time it was made, is kept while nothing else in it changes). So a
rerun with nothing changed rewrites nothing, and adding a generator writes only its cells' files and the
aggregates whose figures it moves.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.store import atomic

SCHEMA_VERSION = "0.3.0"  # the Every Eval Ever schema these records follow
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
_OURS = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}(?:_samples\.jsonl|\.json)$")


def component(value: str) -> str:
    """One safe path component, as the datastore accepts it (no slash, colon or leading dot)."""
    out = _UNSAFE.sub("_", str(value)).strip(". ") or "_"
    return "_" + out if out.lower() == "data" else out


def file_uuid(evaluation_id: str) -> str:
    """A version-4 UUID drawn from the evaluation's id: the same results keep their file's name."""
    return str(uuid.UUID(bytes=hashlib.sha256(evaluation_id.encode()).digest()[:16], version=4))


def store_dir(collection: str, model_id: str) -> str:
    """`data/<collection>/<developer>/<model>` of a model id `developer/name[/...]`."""
    developer, _, name = model_id.partition("/")
    return "/".join(["data", component(collection), component(developer), component(name or developer)])


def aggregate_bytes(record: dict) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def instances_bytes(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records).encode()


@dataclass
class Written:
    """What one export did: files written, files left as they were (same bytes), files removed."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def write_if_changed(path: Path, data: bytes, done: Written, root: Path) -> None:
    rel = path.relative_to(root).as_posix()
    try:
        if path.read_bytes() == data:
            done.unchanged.append(rel)
            return
    except OSError:
        pass
    with atomic.atomic_path(path) as tmp:
        tmp.write_bytes(data)
    done.written.append(rel)


def write_aggregate(path: Path, record: dict, done: Written, root: Path) -> None:
    """The aggregate, its `retrieved_timestamp` the earlier file's where nothing else changed."""
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = None
    if isinstance(before, dict) and {**before, "retrieved_timestamp": None} == {**record, "retrieved_timestamp": None}:
        record = {**record, "retrieved_timestamp": before["retrieved_timestamp"]}
    else:
        record = {**record, "retrieved_timestamp": f"{time.time():.3f}"}
    write_if_changed(path, aggregate_bytes(record), done, root)


def remove_stale(root: Path, kept: set[str], done: Written) -> None:
    """Our files under `root/data` that this export did not write (a generator, judge or dataset no longer
    in the run), and the directories they leave empty."""
    data = root / "data"
    if not data.is_dir():
        return
    for path in sorted(data.rglob("*"), reverse=True):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and _OURS.match(path.name) and rel not in kept:
            path.unlink()
            done.removed.append(rel)
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
