"""What the benches share: alternating repeats, medians with their spread, and targets that fail loudly.

A ratio of two paths timed once each is at the mercy of whatever else the machine does in those
seconds (ours vs raw batched `generate` read 0.13x once on a busy machine, and 1.10x, 1.12x and 0.81x
just after). So each repeat runs every path once, in the opposite order from the repeat before; a
ratio is taken within each repeat (the paths saw the same load) and the figure is the median of those,
with its min-max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

MIN_REPEATS = 5


def alternate(paths: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Wall seconds of each path in each of `repeats` rounds; odd rounds run the paths in reverse."""
    names = list(paths)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            paths[name]()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


def spread(xs: list[float], digits: int = 3) -> dict:
    return {
        "median": round(statistics.median(xs), digits),
        "min": round(min(xs), digits),
        "max": round(max(xs), digits),
    }


def ratios(fast: list[float], slow: list[float]) -> dict:
    """How many times faster `fast` ran than `slow`, repeat by repeat (slow seconds over fast seconds):
    the median of the per-repeat ratios, with their min-max."""
    return {**spread([s / f for f, s in zip(fast, slow)], 2), "repeats": len(fast)}


def shown(s: dict, unit: str = "", digits: int = 2) -> str:
    """`median [min-max]` of a spread."""
    return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


class Targets:
    """Each target with the figure that meets or misses it; `report` prints the misses, one line each,
    and gives the exit status (1 when any was missed). Under --quick the figures mean nothing: the
    targets are listed as not judged, and the status is 0."""

    def __init__(self):
        self.rows: list[tuple[str, bool, str]] = []

    def at_least(self, what: str, value: float, target: float, unit: str = "x") -> bool:
        ok = value >= target
        self.rows.append((what, ok, f"{value:g}{unit}, target >= {target:g}{unit}"))
        return ok

    def at_most(self, what: str, value: float, target: float, unit: str = "") -> bool:
        ok = value <= target
        self.rows.append((what, ok, f"{value:g}{unit}, target <= {target:g}{unit}"))
        return ok

    def report(self, quick: bool) -> int:
        if quick:
            print(f"--quick: {len(self.rows)} target(s) not judged (tiny sizes; the figures mean nothing)")
            return 0
        missed = [r for r in self.rows if not r[1]]
        for what, _, text in missed:
            print(f"TARGET MISSED: {what}: {text}")
        print(f"targets: {len(self.rows) - len(missed)} of {len(self.rows)} met")
        return 1 if missed else 0


def ended(status: int | None) -> int | None:
    """A bench's exit: its figures are printed by now, so it leaves without the interpreter's shutdown
    (genjudge.store.job_log.end: 2.5 CPU-s of a process that imported torch and transformers), or
    returns `status` for sys.exit where something still needs that shutdown."""
    from genjudge.store.job_log import end

    end(status)
    return status
