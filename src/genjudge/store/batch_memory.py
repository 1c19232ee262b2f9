"""Batch sizes chosen by `batch_size: auto`, remembered in the cache directory so that a job's other
shards and its reruns skip the probes.

One JSON file per key under `<cache_dir>/batch-sizes/`, written atomically (two shards choosing at
once both write a valid file; the later wins). The key holds everything the choice depends on: the
model's fingerprint, the devices (name, count, memory), precision and quantization settings, engine,
compilation, sampling (its buffers take memory), the memory margin, and the prompt and answer
lengths by power-of-two bucket. The job's request count is not in it: each job caps the remembered
batch at its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from genjudge.store import atomic
from genjudge.store.item_store import item_key


class BatchMemory:
    def __init__(self, cache_dir):
        self.root = Path(cache_dir) / "batch-sizes"

    def _path(self, key: dict) -> Path:
        return self.root / f"{item_key(**key)[:32]}.json"

    def recall(self, key: dict) -> dict | None:
        """The remembered choice ({batch, reason, ...}) for this key, or None."""
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if data.get("key") == key else None

    def remember(self, key: dict, choice: dict) -> None:
        atomic.write_json(self._path(key), {**choice, "key": key})

    def entries(self) -> list[dict]:
        """Every remembered choice (for `genjudge plan`, which has no fingerprint of the weights)."""
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out
