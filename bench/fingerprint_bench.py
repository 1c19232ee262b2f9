"""Model fingerprint: the first and the repeated fingerprint of a local checkpoint.

Writes a checkpoint of random bytes per size (config.json and `model-0000k-of-0000n.safetensors`
shards of at most 5 GB, as `save_pretrained` splits them), drops it from the page cache
(posix_fadvise DONTNEED after fsync), then times:

  first     fingerprint with an empty digest index: every file over 64 MiB read and hashed
            in full (SHA-256), its digest recorded;
  repeated  the same call again: the digests come from the index (one stat and one readlink
            per large file), nothing is read;
  changed   one byte in the middle of the last shard rewritten (same size): that shard alone
            is hashed again.

The files are deleted afterwards. Check the free space first: each size needs that much.

    .venv/bin/python bench/fingerprint_bench.py --sizes-gb 1 10 --dir /tmp/fpbench

--quick: one checkpoint of 0.1 GB (just over the size from which files are hashed in full) in a
temporary directory: checks the bench still runs (the test suite does); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from genjudge.models.modelref import DigestIndex, fingerprint

SHARD = 5 * 10**9
CHUNK = 64 * 1024 * 1024


def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        left = size
        while left:
            n = min(CHUNK, left)
            fh.write(os.urandom(n))
            left -= n
        fh.flush()
        os.fsync(fh.fileno())


def drop_cache(directory: Path) -> None:
    for f in directory.iterdir():
        with open(f, "rb") as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench(root: Path, gb: float) -> dict:
    size = int(gb * 10**9)
    model = root / f"ckpt-{gb:g}gb"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    n = -(-size // SHARD)
    for k in range(n):
        write_random(model / f"model-{k + 1:05d}-of-{n:05d}.safetensors", min(SHARD, size - k * SHARD))
    time.sleep(2.1)  # past the index's settle time: the digests are recorded
    drop_cache(model)
    index = DigestIndex(root / "digests")
    fp1, first = timed(lambda: fingerprint(str(model), digests=index))
    fp2, repeated = timed(lambda: fingerprint(str(model), digests=index))
    assert fp1 == fp2
    last = sorted(model.glob("*.safetensors"))[-1]
    with open(last, "r+b") as fh:
        fh.seek(last.stat().st_size // 2)
        fh.write(b"\0")
    time.sleep(2.1)
    drop_cache(model)
    fp3, changed = timed(lambda: fingerprint(str(model), digests=index))
    assert fp3 != fp1
    shutil.rmtree(model)
    shutil.rmtree(root / "digests")
    return {
        "size_gb": gb,
        "shards": n,
        "first_s": round(first, 2),
        "repeated_s": round(repeated, 4),
        "after_one_shard_changed_s": round(changed, 2),
        "first_gb_per_s": round(gb / first, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-gb", type=float, nargs="+", default=[1, 10])
    ap.add_argument("--dir", type=Path, help="where to write the checkpoints (required but with --quick)")
    ap.add_argument("--quick", action="store_true", help="one 0.1 GB checkpoint in a temporary directory")
    args = ap.parse_args()
    if args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(bench(args.dir or Path(tmp), 0.1)), flush=True)
        return
    if args.dir is None:
        ap.error("--dir is required: each size needs that much free space there")
    args.dir.mkdir(parents=True, exist_ok=True)
    for gb in args.sizes_gb:
        print(json.dumps(bench(args.dir, gb)), flush=True)


if __name__ == "__main__":
    from _repeats import ended

    ended(main())
