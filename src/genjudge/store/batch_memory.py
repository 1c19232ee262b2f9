"""Batch sizes chosen by `batch_size: auto`, remembered in the cache directory so that a job's other
shards and its reruns skip the probes.

One JSON file per key under `<cache_dir>/batch-sizes/`, written atomically (two shards choosing at
once both write a valid file; the later wins). The key (engine.batch_size.memory_key) holds everything
the choice depends on: the model's fingerprint, the devices (name and memory of each), precision, dtype and
quantization settings, the placement settings (device_map, max_memory), engine, compilation, sampling
(its buffers take memory), logprob verdicts (a forward pass), the memory margin, the torch and
transformers versions, and the prompt and answer lengths by power-of-two bucket. The job's request
count is not in it: each job caps the remembered batch at its own.

An entry holds the probes it was chosen from, so that a job re-solves them at its own lengths
(planning.batch_choice.recalled), the batch that job ran (`cap`), and whether that batch was capped by
the job's own requests (`requests_bound`: a job with more requests probes again). An out-of-memory
halving lowers `cap` (`lower`).
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
        """The remembered choice ({cap, reason, probes, ...}) for this key, or None."""
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if data.get("key") == key else None

    def remember(self, key: dict, choice: dict) -> None:
        atomic.write_json(self._path(key), {**choice, "key": key})

    def lower(self, key: dict, cap: int, reason: str, model_path: str = "") -> None:
        """A batch of this key ran out of memory: remember at most `cap` from now on, whatever the
        requests (an out-of-memory error is measured, not a cap of that job's count)."""
        found = self.recall(key) or {"model_path": model_path, "probes": []}
        if "cap" in found and int(found["cap"]) <= cap:
            return
        self.remember(key, {**found, "cap": int(cap), "requests_bound": False, "reason": reason})

    def entries(self) -> list[dict]:
        """Every remembered choice (for `genjudge plan`, which has no fingerprint of the weights)."""
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out
