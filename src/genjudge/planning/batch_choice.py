"""`batch_size: auto`: the batch a job runs. One function, `choose`, decides it for the job (from a few
short probes of the loaded model) and for `genjudge plan` (from the memory plan and the time model).

Two straight lines describe a batch of b sequences:

    memory  peak(b) = fixed + b x per_sequence     weights and workspace; each sequence's KV cache at
                                                   its full context (prompt + max_new_tokens) and its
                                                   prefill activations
    speed   step(b) = overhead + b x per_sequence  one decoding step: the host's and the weights' fixed
                                                   cost, then each sequence's KV reads and FLOPs

The batch is the smallest of:
- what fits: (margin x capacity - fixed) / per_sequence, less 5% headroom;
- the knee of the speed line: the smallest batch whose tokens/s reach SATURATION of what an unbounded
  batch would give, b = overhead / per_sequence x S / (1 - S). Past it a bigger batch buys little and
  costs more: a transformers batch decodes until its longest answer, so a bigger batch waits longer;
- the job's requests; LIMIT.

`settle` then keeps the measured truth: a batch beyond the probes is probed too, and where its time per
token is not lower than the best probe's, that probe's batch wins (more memory is not always faster).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

HEADROOM = 0.95  # keep 5% below what the memory line says fits
SATURATION = 0.8  # the knee: 80% of the tokens/s an unbounded batch would reach
LIMIT = 4096  # no batch beyond this, whatever the lines say
FALLING = 0.97  # a bigger batch must cut the time per token by 3% or more to be worth it


@dataclass(frozen=True)
class Probe:
    """A short run of the loaded model at one batch: its peak memory and one decoding step's seconds."""

    batch: int
    peak_bytes: float | None  # None: not measured (CPU)
    step_seconds: float | None  # None: the probe ran out of memory
    context_tokens: int = 0  # tokens per sequence in the KV cache at the probe's peak

    @property
    def seconds_per_token(self) -> float | None:
        return None if self.step_seconds is None else self.step_seconds / self.batch


@dataclass(frozen=True)
class MemoryLine:
    fixed_bytes: float
    per_sequence_bytes: float
    capacity_bytes: float
    source: str

    def fits(self, margin: float) -> int:
        room = margin * self.capacity_bytes - self.fixed_bytes
        if self.per_sequence_bytes <= 0:
            return LIMIT
        return max(0, int(room // self.per_sequence_bytes))


@dataclass(frozen=True)
class StepLine:
    overhead_seconds: float
    per_sequence_seconds: float
    source: str

    def seconds(self, batch: int) -> float:
        return self.overhead_seconds + batch * self.per_sequence_seconds

    def knee(self) -> int | None:
        """The smallest batch at SATURATION of the unbounded batch's tokens/s (None: no growth measured)."""
        if self.per_sequence_seconds <= 0:
            return None
        knee = self.overhead_seconds / self.per_sequence_seconds * SATURATION / (1 - SATURATION)
        return max(1, math.ceil(knee - 1e-6))  # not a batch more for a rounding error


@dataclass
class Choice:
    """The chosen batch, which cap decided it, and everything it was decided from (for the meta)."""

    batch: int
    decided_by: str  # memory, speed, requests, limit, probe, configured, cpu, remembered
    reason: str
    memory_cap: int | None = None
    speed_cap: int | None = None
    requests_cap: int | None = None
    memory: MemoryLine | None = None
    speed: StepLine | None = None
    probes: list = field(default_factory=list)
    search_seconds: float = 0.0
    remembered: bool = False

    def meta(self) -> dict:
        out = asdict(self)
        out["probes"] = [asdict(p) for p in self.probes]
        return out


def memory_line_from_probes(
    probes: list[Probe], capacity_bytes: float, kv_bytes_per_token: float, full_context: int
) -> MemoryLine | None:
    """Peak memory against the batch, fitted through the probes that ran, with each sequence's KV cache
    grown from the probe's context to the job's full one (the probes stop after a few steps)."""
    ran = [p for p in probes if p.peak_bytes is not None and p.step_seconds is not None]
    if not ran:
        return None
    grow = max(0, full_context - max(p.context_tokens for p in ran)) * kv_bytes_per_token
    if len({p.batch for p in ran}) < 2:
        p = ran[0]
        # One point: all of it beyond the KV cache's analytic size is counted as fixed (an upper bound).
        per_seq = kv_bytes_per_token * p.context_tokens
        return MemoryLine(p.peak_bytes - p.batch * per_seq, per_seq + grow, capacity_bytes, "one probe")
    fit = statistics.linear_regression([p.batch for p in ran], [p.peak_bytes for p in ran])
    # The slope is at least the KV cache of the probe's own context (noise never makes a sequence free).
    slope = max(fit.slope, kv_bytes_per_token * min(p.context_tokens for p in ran))
    fixed = max(p.peak_bytes - slope * p.batch for p in ran)
    return MemoryLine(fixed, slope + grow, capacity_bytes, f"fitted through {len(ran)} probes")


WORKSPACE = 1024**3  # the allocator's and CUDA libraries' workspace beside the weights
PREFILL_BYTES_PER_TOKEN_HIDDEN = 22  # one layer's prefill activations: ~11 hidden-sized bf16 rows a token


def memory_line_from_plan(p: dict, prompt_tokens: float) -> MemoryLine | None:
    """The memory line `genjudge plan` predicts from the memory plan (engine.memory_plan.plan): the
    weights and a workspace per GPU, and each sequence's KV cache at the full context (spread over
    the job's GPUs) with one layer's prefill activations. None on a CPU."""
    gpus = p.get("gpus") or []
    if not gpus:
        return None
    k = len(gpus)
    weights = p["weights_bytes"].get(p["precision"], p["weights_bytes"]["bfloat16"])
    per_seq = p["kv_bytes_per_token"] * p["seq_len"] / k
    per_seq += prompt_tokens * (p.get("hidden_size") or 0) * PREFILL_BYTES_PER_TOKEN_HIDDEN
    capacity = min(g["total_bytes"] for g in gpus)
    return MemoryLine(weights / k + WORKSPACE, per_seq, capacity, "the memory plan (an estimate)")


def step_line_from_probes(probes: list[Probe]) -> StepLine | None:
    ran = [p for p in probes if p.step_seconds is not None]
    if len({p.batch for p in ran}) < 2:
        return None
    fit = statistics.linear_regression([p.batch for p in ran], [p.step_seconds for p in ran])
    return StepLine(max(fit.intercept, 0.0), max(fit.slope, 0.0), f"fitted through {len(ran)} probes")


def choose(
    memory: MemoryLine | None,
    speed: StepLine | None,
    requests: int,
    margin: float,
    limit: int = LIMIT,
    probes: list[Probe] | None = None,
) -> Choice:
    """The batch from the two lines and the caps (see the module's docstring)."""
    requests = max(1, int(requests))
    mem_cap = None if memory is None else int(memory.fits(margin) * HEADROOM)
    speed_cap = None if speed is None else speed.knee()
    ran = [p for p in probes or [] if p.step_seconds is not None]
    degenerate = speed is not None and ran and speed.overhead_seconds <= 0 < speed.per_sequence_seconds
    if degenerate:  # a negative intercept (noise) puts the knee at 1: trust the probes' own times instead
        speed_cap = min(ran, key=lambda p: (p.seconds_per_token, p.batch)).batch
    elif speed_cap is not None and ran:  # a batch that ran is never too small to be worth it
        speed_cap = max(speed_cap, min(p.batch for p in ran))
    caps = {"requests": requests, "limit": limit}
    if speed_cap is not None:
        caps["speed"] = speed_cap
    if mem_cap is not None:
        caps["memory"] = max(1, mem_cap)
    decided_by = min(caps, key=lambda k: (caps[k], ["memory", "requests", "speed", "limit"].index(k)))
    batch = caps[decided_by]
    parts = []
    if mem_cap is not None:
        parts.append(
            f"memory fits {mem_cap} ({memory.fixed_bytes / 1e9:.1f} GB fixed + "
            f"{memory.per_sequence_bytes / 1e6:.1f} MB a sequence, margin {margin:g}, 5% headroom; "
            f"{memory.source})"
        )
    if degenerate:
        parts.append(
            f"the step line through the probes has no fixed cost ({speed.source}): the probe fastest per token, "
            f"batch {speed_cap}"
        )
    elif speed is not None:
        knee = "no knee" if speed_cap is None else f"the speed knee is {speed_cap}"
        if speed_cap is not None and speed_cap != speed.knee():
            knee += f" (the line's {speed.knee()} raised to the smallest probe that ran)"
        parts.append(
            f"{knee} ({speed.overhead_seconds * 1e3:.1f} ms a step + {speed.per_sequence_seconds * 1e3:.3f} ms "
            f"a sequence: {SATURATION:.0%} of the most tokens/s; {speed.source})"
        )
    parts.append(f"{requests} request(s)")
    reason = f"batch {batch}, decided by {decided_by}: " + "; ".join(parts)
    if mem_cap is not None and mem_cap < 1:
        reason += "; even one sequence is above the memory margin: batch 1 (it may still run)"
    return Choice(batch, decided_by, reason, mem_cap, speed_cap, requests, memory, speed, list(probes or []))


def settle(choice: Choice, confirm: Probe | None) -> Choice:
    """Measured over modelled: `confirm` is a probe at `choice.batch` (when it is beyond the earlier
    probes). Where it ran out of memory, or its time per token is not lower than the best earlier
    probe's by a few percent, the best earlier probe's batch is kept."""
    if confirm is None:
        return choice
    earlier = [p for p in choice.probes if p.seconds_per_token is not None]
    choice.probes.append(confirm)
    if not earlier:
        return choice
    best = min(earlier, key=lambda p: (p.seconds_per_token, p.batch))
    if confirm.seconds_per_token is not None and confirm.seconds_per_token < best.seconds_per_token * FALLING:
        return choice
    why = (
        "ran out of memory"
        if confirm.seconds_per_token is None
        else f"took {confirm.seconds_per_token * 1e3:.3f} ms a token vs {best.seconds_per_token * 1e3:.3f} ms"
    )
    choice.batch = best.batch
    choice.decided_by = "probe"
    choice.reason += f"; but batch {confirm.batch} {why} at batch {best.batch}: batch {best.batch}"
    return choice


def recalled(entry: dict, requests: int, full_context: int, margin: float) -> Choice | None:
    """A remembered choice (store.batch_memory) for a job of `requests` sequences of `full_context`
    tokens each: the earlier probes' lines solved again at this job's lengths (a key's length bucket
    spans up to twice the tokens), never above the batch the earlier job ran. None where the entry
    cannot answer: its batch was capped by that job's own fewer requests, and this job has more (it
    probes)."""
    requests = max(1, int(requests))
    cap = int(entry["cap"])
    if entry.get("requests_bound") and requests > cap:
        return None
    probes = [Probe(**p) for p in entry.get("probes") or []]
    capacity, kv = entry.get("capacity_bytes"), entry.get("kv_bytes_per_token") or 0.0
    mem = memory_line_from_probes(probes, capacity, kv, full_context) if capacity else None
    c = choose(mem, step_line_from_probes(probes), requests, margin, probes=probes)
    batch = max(1, min(c.batch, cap))
    reason = f"batch {batch}: remembered from an earlier job ({entry.get('reason', '')})"
    if c.batch < cap:
        reason += f"; at this job's {full_context} tokens a sequence and {requests} request(s): {c.reason}"
    return Choice(
        batch,
        "remembered",
        reason,
        c.memory_cap,
        c.speed_cap,
        requests,
        c.memory,
        c.speed,
        probes,
        remembered=True,
    )


def length_bucket(tokens: int) -> int:
    """Lengths grouped by powers of two (a choice made for 300-token prompts holds for 400)."""
    return 1 << max(0, math.ceil(math.log2(max(1, tokens))))
