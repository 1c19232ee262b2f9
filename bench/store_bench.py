"""Item store: cost per item of an append and of a lookup, with 10k and with 1M items stored.

Three layouts, each filled to N records (~450 bytes each, like a short generation):

  linked-logs   genjudge.store.item_store.ItemStore: a log per writer, a symbolic link per key.
                Filled by writers of --shard records (1000: 10 logs at 10k, 1,000 at 1M). A
                lookup opens each log its keys are in: up to one open per key, whatever N.
  jsonl         the previous layout: a JSONL file per writer, every append re-reading the
                writer's own file, every lookup parsing every file. Filled as one writer
                with N records (a long job resuming), the case the issue measured.
  sqlite-wal    a candidate: one SQLite database in WAL mode, synchronous=FULL (fsync per
                batch), key as primary key. Not safe on network filesystems (see the
                item_store docstring); measured to know what the choice costs.

append: one batch of 16 new records (fsync included), per record.
lookup: a fresh store instance loading 1,000 keys (900 stored, 100 not), per key.
Each figure is the median of --repeats runs, with min and max, after the fill
has been synced to disk. The page cache is
warm (the store was just written): on a cold cache or a network filesystem every
layout pays more per read, and the old one reads the whole store.

    .venv/bin/python bench/store_bench.py --sizes 10000 1000000 --repeats 7

--quick: 1,000 records, 2 repeats, every layout, in seconds: checks the bench still runs (the test
suite does); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from genjudge.store.item_store import ItemStore  # noqa: E402

BATCH = 16
WANTED = 1000
# --quick: seconds, to check that the bench still runs against the package (its figures mean nothing).
QUICK = {"sizes": [WANTED], "repeats": 2, "shard": 250}


def record(i: int, tag: str = "s") -> dict:
    key = hashlib.sha256(f"{tag}{i}".encode()).hexdigest()
    text = f"The answer to item {i} is {i % 97}. " * 9
    return {
        "key": key,
        "id": f"q{i}",
        "output": text[:300],
        "n_prompt_tokens": 40 + i % 50,
        "n_generated_tokens": 80 + i % 40,
        "finish_reason": "stop",
    }


class LinkedLogs:
    name = "linked-logs"

    def __init__(self, root: Path, shard: int = 1000):
        self.root = root
        self.shard = shard

    def fill(self, n: int) -> None:
        for start in range(0, n, self.shard):
            store = ItemStore(self.root, f"fill-shard{start // self.shard}")
            store.append([record(i) for i in range(start, min(n, start + self.shard))])
            store.close()

    def writer(self):
        store = ItemStore(self.root, "bench-writer")
        return store.append

    def lookup(self, keys: set[str]) -> dict:
        return ItemStore(self.root, "bench-reader").load(keys)


class Jsonl:
    """The layout item_store.py had before: kept here only to measure it."""

    name = "jsonl"

    def __init__(self, root: Path, shard: int = 0):
        self.root = root
        self.own = root / "own.jsonl"

    def fill(self, n: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.own, "w", encoding="utf-8") as fh:
            for i in range(n):
                fh.write(json.dumps(record(i), ensure_ascii=False, sort_keys=True) + "\n")

    def writer(self):
        def append(records):
            with open(self.own, "rb+") as fh:  # cut a torn tail: reads the whole file
                data = fh.read()
                end = data.rfind(b"\n") + 1
                if end != len(data):
                    fh.truncate(end)
            payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
            with open(self.own, "a", encoding="utf-8") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())

        return append

    def lookup(self, keys: set[str]) -> dict:
        found = {}
        for path in sorted(self.root.glob("*.jsonl")):
            with open(path, "rb") as fh:
                data = fh.read()
            for line in data[: data.rfind(b"\n") + 1].splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec.get("key") in keys:
                    found[rec["key"]] = rec
        return found


class SqliteWal:
    name = "sqlite-wal"

    def __init__(self, root: Path, shard: int = 0):
        self.root = root
        self.path = root / "store.sqlite"

    def _connect(self):
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, rec TEXT NOT NULL) WITHOUT ROWID")
        return db

    def fill(self, n: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        for start in range(0, n, 100_000):
            db.execute("BEGIN")
            db.executemany(
                "INSERT OR REPLACE INTO items VALUES (?, ?)",
                (
                    (r["key"], json.dumps(r, sort_keys=True))
                    for r in (record(i) for i in range(start, min(n, start + 100_000)))
                ),
            )
            db.execute("COMMIT")
        db.close()

    def writer(self):
        db = self._connect()

        def append(records):
            db.execute("BEGIN")
            db.executemany(
                "INSERT OR REPLACE INTO items VALUES (?, ?)",
                [(r["key"], json.dumps(r, sort_keys=True)) for r in records],
            )
            db.execute("COMMIT")

        return append

    def lookup(self, keys: set[str]) -> dict:
        db = self._connect()
        found = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            q = f"SELECT rec FROM items WHERE key IN ({','.join('?' * len(chunk))})"
            for (text,) in db.execute(q, chunk):
                rec = json.loads(text)
                found[rec["key"]] = rec
        db.close()
        return found


BACKENDS = {b.name: b for b in (LinkedLogs, Jsonl, SqliteWal)}


def summary(values: list[float]) -> dict:
    return {
        "median_us": round(statistics.median(values) * 1e6, 2),
        "min_us": round(min(values) * 1e6, 2),
        "max_us": round(max(values) * 1e6, 2),
    }


def disk_use(root: Path) -> dict:
    du = subprocess.run(["du", "-sk", str(root)], capture_output=True, text=True).stdout.split()
    inodes = sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))
    return {"disk_mb": round(int(du[0]) / 1024, 1) if du else None, "inodes": inodes}


def measure(backend_cls, n: int, repeats: int, base: Path, rng: random.Random, shard: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"{backend_cls.name}-{n}-", dir=base))
    backend = backend_cls(root, shard)
    t0 = time.perf_counter()
    backend.fill(n)
    fill_s = time.perf_counter() - t0
    os.sync()  # measure appends in a steady state, not the commit of the whole fill's metadata
    append = backend.writer()
    append_costs = []
    for r in range(repeats):
        batch = [record(n + r * BATCH + i, tag="new") for i in range(BATCH)]
        t = time.perf_counter()
        append(batch)
        append_costs.append((time.perf_counter() - t) / BATCH)
    lookup_costs = []
    for r in range(repeats):
        present = {record(i)["key"] for i in rng.sample(range(n), int(WANTED * 0.9))}
        absent = {record(i, tag="absent")["key"] for i in range(r * WANTED, r * WANTED + WANTED // 10)}
        wanted = present | absent
        t = time.perf_counter()
        found = backend.lookup(wanted)
        lookup_costs.append((time.perf_counter() - t) / len(wanted))
        assert set(found) == present, f"{backend_cls.name}: lookup returned {len(found)} of {len(present)}"
    result = {
        "backend": backend_cls.name,
        "stored": n,
        "fill_seconds": round(fill_s, 1),
        "records_per_writer": shard if backend_cls is LinkedLogs else None,
        "append_per_item": summary(append_costs),
        "lookup_per_item": summary(lookup_costs),
        **disk_use(root),
    }
    shutil.rmtree(root)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shard", type=int, default=1000, help="records per writer when filling linked-logs")
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    ap.add_argument(
        "--dir",
        default=None,
        help="where to build the stores (default: the system temp dir); "
        "point it at a network filesystem to measure one",
    )
    ap.add_argument("--out", default=None, help="also write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK}")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    base = Path(args.dir or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    results = []
    for name in args.backends:
        for n in args.sizes:
            res = measure(BACKENDS[name], n, args.repeats, base, rng, args.shard)
            results.append(res)
            a, lk = res["append_per_item"], res["lookup_per_item"]
            print(
                f"{name:12s} {n:>9,d} stored  append {a['median_us']:>9.1f} us/item "
                f"[{a['min_us']:.1f}-{a['max_us']:.1f}]  lookup {lk['median_us']:>9.1f} us/item "
                f"[{lk['min_us']:.1f}-{lk['max_us']:.1f}]  fill {res['fill_seconds']}s  "
                f"{res['disk_mb']} MB  {res['inodes']:,d} inodes",
                flush=True,
            )
    for name in args.backends:
        rows = [r for r in results if r["backend"] == name]
        if len(rows) >= 2:
            lo, hi = rows[0], rows[-1]
            print(
                f"{name:12s} ratio {hi['stored']:,d}/{lo['stored']:,d}: append "
                f"{hi['append_per_item']['median_us'] / lo['append_per_item']['median_us']:.2f}x, lookup "
                f"{hi['lookup_per_item']['median_us'] / lo['lookup_per_item']['median_us']:.2f}x"
            )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "repeats": args.repeats,
                    "batch": BATCH,
                    "wanted": WANTED,
                    "command": " ".join(sys.argv),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    from _repeats import ended

    sys.exit(ended(main()))
