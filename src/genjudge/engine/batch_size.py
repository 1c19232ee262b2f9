"""`batch_size: auto`: the largest batch that fits the job's GPUs.

Grow by powers of two until a batch runs out of memory or its peak use passes
the safety margin, binary-search between the last good and the first bad size,
then keep 5% headroom. A batch that ran but peaked above the margin is not
refused outright: when no batch stays under the margin (weights alone nearly fill
the GPUs), the smallest batch that ran is used, with a warning. On CPU there is
nothing to probe: a fixed size is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from genjudge.engine.decoding import CPU_AUTO_BATCH
from genjudge.engine.devices import is_oom

log = logging.getLogger(__name__)

HEADROOM = 0.95


def search_batch_size(trial: Callable[[int], float], margin: float = 0.9, limit: int = 1024) -> int:
    """trial(bs) runs a batch and returns its peak memory as a fraction of capacity
    (the maximum over the job's devices), or raises an out-of-memory error."""

    ran_above_margin: dict[int, float] = {}  # sizes that ran without OOM but peaked above the margin

    def fits(bs: int) -> bool:
        try:
            used = trial(bs)
        except Exception as exc:  # noqa: BLE001
            if not is_oom(exc):
                raise
            return False
        if used > margin:
            ran_above_margin[bs] = used
            return False
        return True

    good, bad = 0, None
    bs = 1
    while bs <= limit:
        if fits(bs):
            good = bs
            bs *= 2
        else:
            bad = bs
            break
    if good == 0:
        if not ran_above_margin:
            raise RuntimeError("even a batch of 1 does not fit in GPU memory: use more GPUs or quantization")
        # The doubling stops at the first size above the margin, so this is the batch of 1.
        bs = max(ran_above_margin)
        log.warning(
            "batch_size auto: even a batch of %d peaks at %.0f%% of GPU memory, above the %.0f%% margin; "
            "using %d (it ran without running out of memory)",
            bs,
            ran_above_margin[bs] * 100,
            margin * 100,
            bs,
        )
        return bs
    if bad is None:
        return max(1, int(good * HEADROOM))
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return max(1, int(good * HEADROOM))


def auto_batch_size(model, probe: Callable[[int], None] | None = None, margin: float = 0.9) -> int:
    """Probe the GPUs with `probe(bs)` (a worst-case batch); CPU: a fixed size."""
    import torch

    if not torch.cuda.is_available() or probe is None:
        log.info("batch_size auto: no GPU to probe, using the fixed CPU batch size %d", CPU_AUTO_BATCH)
        return CPU_AUTO_BATCH

    from genjudge.engine import tensor_parallel

    probe = tensor_parallel.agree(probe)  # the ranks of a tensor-parallel group decide together

    # A rank of a tensor-parallel group looks at its own GPU only (touching the others would
    # start a CUDA context on each of them).
    devices = [torch.cuda.current_device()] if tensor_parallel.active() else range(torch.cuda.device_count())

    def trial(bs: int) -> float:
        fractions = []
        for d in devices:
            torch.cuda.reset_peak_memory_stats(d)
        try:
            probe(bs)
        finally:
            torch.cuda.empty_cache()
        for d in devices:
            total = torch.cuda.get_device_properties(d).total_memory
            fractions.append(torch.cuda.max_memory_allocated(d) / total)
        return tensor_parallel.agree_max(max(fractions))

    bs = search_batch_size(trial, margin=margin)
    log.info("batch_size auto: %d (peak memory under %.0f%% on every GPU, 5%% headroom)", bs, margin * 100)
    return bs
