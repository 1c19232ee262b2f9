"""Constants of the time model that only a GPU can tell: the host's seconds per decoding step (eager and
compiled), the KV cache's passes per step, bitsandbytes' cost against bf16, a job's set-up and compile
seconds. Each is an entry of gpu_constants.json with the GPU, versions, date and command that measured
it; `make gpu-check` measures them again and writes its GPU's entries there.

A plan for a GPU with entries of its own uses them; for another GPU it uses those of the GPU measured
and says so (`Lookup.note`): a decoding step's seconds scaled by the two GPUs' datasheet bandwidth
(never below 1), the host's seconds and the ratios as they are. Per-layer host overhead and quantization's
factor depend on the host and the kernels more than on the GPU, but nobody has measured them there.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

PATH = Path(__file__).with_name("gpu_constants.json")


@dataclass(frozen=True)
class Constant:
    name: str
    value: float
    unit: str
    gpu: str
    versions: str
    date: str
    command: str
    derivation: str = ""
    engine: str = "transformers"
    mode: str | None = None
    precision: str | None = None
    batch: int | None = None

    def source(self) -> str:
        return f"measured on {self.gpu} ({self.versions}, {self.date}): {self.derivation or self.command}"


@functools.cache
def entries(path: str = str(PATH)) -> tuple[Constant, ...]:
    data = json.loads(Path(path).read_text())
    return tuple(Constant(**e) for e in data["entries"])


def same_name(a: str, b: str) -> bool:
    """GPU names that are the same but for case, spaces, dashes and the vendor."""
    norm = [x.lower().replace("nvidia", "").replace(" ", "").replace("-", "") for x in (a, b)]
    return norm[0] == norm[1] or norm[0] in norm[1] or norm[1] in norm[0]


@dataclass(frozen=True)
class Lookup:
    constant: Constant
    exact: bool  # measured on this GPU
    scale: float = (
        1.0  # another GPU's figure in seconds, scaled to this one by their datasheets (hardware.datasheet_scale)
    )

    @property
    def value(self) -> float:
        return self.constant.value * self.scale

    def note(self, gpu: str) -> str:
        if self.exact:
            return f"{self.constant.name}: {self.constant.source()}"
        how = (
            f"the figure of {self.constant.gpu} x{self.scale:.2f} (scaled by the two GPUs' datasheet memory "
            "bandwidth, which bounds a decoding step; never below 1)"
            if self.constant.name in PER_STEP
            else f"the figure of {self.constant.gpu}, as it is (host-side work, not scaled by the GPU)"
            if self.constant.unit == "s"
            else f"the figure of {self.constant.gpu}, as it is (a ratio, not seconds)"
        )
        return (
            f"{self.constant.name}: never measured on {gpu}; {how} "
            f"({self.constant.versions}, {self.constant.date}); `make gpu-check` there measures it"
        )


# Seconds a decoding step spends, scaled to an unmeasured GPU by datasheet bandwidth; the other figures in
# seconds (a job's set-up, compiling) are the host's work and carry over as they are.
PER_STEP = {"step_overhead_per_layer"}


def lookup(name: str, gpu: str, same=same_name, scale=None, **match) -> list[Lookup]:
    """The entries of `name` matching `match` (engine, mode, precision), this GPU's where it has any
    (`same(a, b)`: whether two names are one kind of GPU), else those of the first GPU listed, a step's
    figure scaled by `scale(measured_on, gpu)` (hardware.datasheet_scale; none: 1); one per batch where
    they differ by batch."""
    found = [e for e in entries() if e.name == name and all(getattr(e, k) == v for k, v in match.items())]
    mine = [e for e in found if same(e.gpu, gpu)]
    if mine:
        return [Lookup(e, True) for e in mine]
    if not found:
        return []
    first = found[0].gpu
    return [
        Lookup(e, False, scale(e.gpu, gpu) if scale is not None and e.name in PER_STEP else 1.0)
        for e in found
        if e.gpu == first
    ]


def by_batch(found: list[Lookup], batch: float) -> float | None:
    """A constant measured at several batches, at `batch`: linear between them, flat beyond."""
    if not found:
        return None
    points = sorted((f.constant.batch or 1, f.value) for f in found)
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, v0), (b1, v1) in zip(points, points[1:]):
        if batch <= b1:
            return v0 + (v1 - v0) * (batch - b0) / (b1 - b0)
    return points[-1][1]
