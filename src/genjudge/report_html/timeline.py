"""The run's jobs on a time line, from their meta files alone (no plotting here).

Each model job's meta says when it started and finished (unix seconds), which GPUs it held,
how long it spent loading its model and computing. From that:

- one lane per GPU (per host and GPU when jobs ran on several hosts) and CPU lanes for jobs
  without GPUs (several when CPU jobs overlapped), a bar per job on every lane it held;
- per lane the busy, load and compute seconds, and for GPUs the idle seconds and the busy
  fraction over the window from the first job's start to the last job's finish;
- the wall time of each stage (all shards of a generator on a dataset; each judge);
- the critical path: from the last job to finish back through the job it waited for last, for its
  input (a judge waits for every generation shard of the cells it grades) or for its GPUs (the job
  before it on one of them), with the gap before each.

The meta records durations, not the moments of loading and computing: within a bar the load is
drawn first (the model is loaded before anything is computed), then the compute, then the rest
(reading inputs, writing outputs).

A report after a rerun holds the jobs of several `snakemake` commands (each meta names its command,
genjudge.store.records.INVOCATION_ENV), and the attempts that failed (genjudge.store.failures records
them). `bands` makes one time line per command: its idle time, stage walls and critical path are its
own, so the time between two commands (the user fixing the config) is never a gap in the workflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from genjudge.store.records import invocation_started

CPU = "CPU"


@dataclass
class Job:
    name: str  # e.g. "generate demo/questions #0", "judge demo-judge"
    stage: str  # e.g. "generate demo/questions", "judge demo-judge"
    kind: str  # generate or judge
    host: str
    gpus: list[str]
    start: float  # unix seconds
    end: float
    load_seconds: float
    compute_seconds: float
    n_items: int = 0
    resumed: int = 0  # from an earlier run's records
    shared: int = 0  # answered by an identical request of this run
    computed: int = 0
    setup_seconds: float = 0.0  # the tokenizer and the model's fingerprint, before the weights load
    tokens_per_second: float | None = None
    waited_for_gpus_seconds: float = 0.0
    reads: set = field(default_factory=set)  # (generator, dataset) whose generations the job needs
    invocation: str | None = None  # the snakemake command that ran it
    failed: str | None = None  # a failed attempt: its error, "Type: first line"

    @property
    def wall(self) -> float:
        return self.end - self.start


@dataclass
class Bar:
    lane: str
    job: Job
    start: float  # seconds from the window's start
    end: float

    @property
    def load_end(self) -> float:
        return min(self.end, self.start + self.job.load_seconds)

    @property
    def compute_end(self) -> float:
        return min(self.end, self.load_end + self.job.compute_seconds)


@dataclass
class LaneStats:
    lane: str
    kind: str  # gpu or cpu
    jobs: int
    busy_seconds: float
    load_seconds: float
    compute_seconds: float
    idle_seconds: float
    busy_fraction: float | None


@dataclass
class Timeline:
    t0: float  # unix seconds of the first job's start
    span: float  # seconds to the last job's finish
    jobs: list[Job]
    lanes: list[str]  # top to bottom
    bars: list[Bar]
    lane_stats: list[LaneStats]
    stages: list[dict]
    critical_path: list[dict]
    invocation: str | None = None
    command_started: float | None = None  # unix seconds the snakemake command started, where known

    @property
    def failed(self) -> list[Job]:
        return [j for j in self.jobs if j.failed]

    def stats(self, lane: str) -> LaneStats:
        return next(s for s in self.lane_stats if s.lane == lane)


def _cells_read(cells: dict) -> set:
    """(generator, dataset) pairs behind a judge's cell keys "generator/dataset[ vs opponent]"."""
    out = set()
    for key in cells or {}:
        pair, _, opponent = key.partition(" vs ")
        generator, _, dataset = pair.partition("/")
        out.add((generator, dataset))
        if opponent:
            out.add((opponent, dataset))
    return out


def _job(m, name: str, stage: str, kind: str, compute_seconds, **extra) -> Job:
    """A model job's bar data from its meta (generation or judge)."""
    return Job(
        name=name,
        stage=stage,
        kind=kind,
        host=m.hostname or "",
        gpus=[str(g) for g in m.gpus or []],
        start=m.started_at,
        end=m.finished_at,
        load_seconds=m.load_seconds or 0.0,
        compute_seconds=compute_seconds or 0.0,
        n_items=m.n_items,
        resumed=m.resumed_items,
        shared=m.shared_items,
        computed=m.computed_items,
        setup_seconds=m.setup_seconds or 0.0,
        tokens_per_second=m.tokens_per_second,
        waited_for_gpus_seconds=m.waited_for_gpus_seconds or 0.0,
        invocation=m.invocation,
        **extra,
    )


def attempt_job(a: dict) -> Job | None:
    """A failed attempt (a record of genjudge.store.failures.attempts_of) as a job of its own; None for
    records kept before they said when the attempt started."""
    if a.get("started_at") is None or a.get("at") is None:
        return None
    if a["role"] == "generate":
        pair, _, shard = a["job"].rpartition("/")
        stage, name = f"generate {pair}", f"generate {pair} #{shard}"
    else:
        judge, _, part = a["job"].rpartition("/")
        stage = name = f"judge {judge}"
        if not part.endswith("-of-1"):
            name += f" #{part.split('-of-')[0]}"
    message = (str(a.get("message") or "").splitlines() or [""])[0]
    return Job(
        name=f"{name} (failed)",
        stage=stage,
        kind=a["role"],
        host=a.get("hostname") or "",
        gpus=[str(g) for g in a.get("gpus") or []],
        start=a["started_at"],
        end=max(a["at"], a["started_at"]),
        load_seconds=0.0,
        compute_seconds=0.0,
        invocation=a.get("invocation"),
        failed=f"{a.get('type', 'Error')}: {message}",
    )


def jobs_from_metas(gen_metas, judge_metas: dict, attempts=()) -> list[Job]:
    """Jobs of the generation metas and of each judge's metas (one per judge shard), and the failed
    `attempts` (genjudge.store.failures.attempts_of); metas without start or finish times (written by
    something that did not run) are left out."""
    jobs = [j for a in attempts if (j := attempt_job(a)) is not None]
    for m in gen_metas:
        if m.started_at is None or m.finished_at is None:
            continue
        stage = f"generate {m.generator}/{m.dataset}"
        jobs.append(_job(m, f"{stage} #{m.shard}", stage, "generate", m.generate_seconds))
    for judge, meta in judge_metas.items():
        shards = meta.jobs()
        for m in shards:
            if m.started_at is None or m.finished_at is None:
                continue
            stage = f"judge {judge}"
            name = stage if len(shards) == 1 else f"{stage} #{m.judge_shard}"
            jobs.append(_job(m, name, stage, "judge", m.judge_seconds, reads=_cells_read(m.cells or meta.cells)))
    return jobs


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _gpu_key(g: str) -> tuple:
    return (0, int(g), "") if g.isdigit() else (1, 0, g)


def bands(jobs: list[Job], inventory: list | None = None, max_cpu_lanes: int = 16) -> list[Timeline]:
    """One time line per snakemake command that ran some of `jobs`, oldest first. Jobs whose meta names
    no command (written before metas recorded it) make one time line together."""
    groups: dict = {}
    for j in jobs:
        groups.setdefault(j.invocation, []).append(j)
    out = [build(js, inventory, max_cpu_lanes, invocation=inv) for inv, js in groups.items()]
    return sorted(out, key=lambda t: t.t0)


def build(
    jobs: list[Job], inventory: list | None = None, max_cpu_lanes: int = 16, invocation: str | None = None
) -> Timeline:
    """The time line of `jobs` (one command's). `inventory`: GPU ids that get a lane even when no job
    used them (a configured local inventory), so that a GPU nobody used shows as idle."""
    jobs = sorted(jobs, key=lambda j: (j.start, j.name))
    if not jobs:
        return Timeline(0.0, 0.0, [], [], [], [], [], [])
    t0 = min(j.start for j in jobs)
    span = max(j.end for j in jobs) - t0
    hosts = sorted({j.host for j in jobs if j.host}) or [""]
    if len(hosts) == 1:  # a meta without its host ran on the only host the others name
        for j in jobs:
            j.host = j.host or hosts[0]
    several_hosts = len(hosts) > 1

    def gpu_lane(host, g):
        return f"{host} GPU {g}" if several_hosts else f"GPU {g}"

    gpu_lanes: dict[tuple, str] = {}
    for j in jobs:
        for g in j.gpus:
            gpu_lanes[(j.host, _gpu_key(g))] = gpu_lane(j.host, g)
    if inventory is not None and not several_hosts:
        for g in inventory:
            gpu_lanes.setdefault((hosts[0], _gpu_key(str(g))), gpu_lane(hosts[0], str(g)))
    bars: list[Bar] = []
    cpu_free_at: list[float] = []  # per CPU lane, when its last bar ends
    for j in jobs:
        s, e = j.start - t0, j.end - t0
        if j.gpus:
            bars += [Bar(gpu_lanes[(j.host, _gpu_key(g))], j, s, e) for g in j.gpus]
            continue
        # CPU jobs that overlap go to lanes of their own (first free lane; the last one when all are taken).
        lane = next((i for i, free in enumerate(cpu_free_at) if free <= s), None)
        if lane is None:
            if len(cpu_free_at) < max_cpu_lanes:
                cpu_free_at.append(e)
                lane = len(cpu_free_at) - 1
            else:
                lane = len(cpu_free_at) - 1
        cpu_free_at[lane] = max(cpu_free_at[lane], e)
        bars.append(Bar(CPU if lane == 0 else f"{CPU} {lane + 1}", j, s, e))
    lanes = [gpu_lanes[k] for k in sorted(gpu_lanes)]
    lanes += [CPU if i == 0 else f"{CPU} {i + 1}" for i in range(len(cpu_free_at))]
    stats = []
    for lane in lanes:
        own = [b for b in bars if b.lane == lane]
        busy = _union_length([(b.start, b.end) for b in own])
        is_gpu = not lane.startswith(CPU)
        stats.append(
            LaneStats(
                lane=lane,
                kind="gpu" if is_gpu else "cpu",
                jobs=len(own),
                busy_seconds=busy,
                load_seconds=sum(b.load_end - b.start for b in own),
                compute_seconds=sum(b.compute_end - b.load_end for b in own),
                idle_seconds=max(0.0, span - busy),
                busy_fraction=busy / span if span > 0 else None,
            )
        )
    return Timeline(
        t0,
        span,
        jobs,
        lanes,
        bars,
        stats,
        stage_walls([j for j in jobs if not j.failed], t0),
        critical_path(jobs, t0),
        invocation,
        invocation_started(invocation),
    )


def stage_walls(jobs: list[Job], t0: float) -> list[dict]:
    """Per stage: jobs, first start and last finish (from the window's start), wall, load and compute sums."""
    out: dict[str, dict] = {}
    for j in jobs:
        s = out.setdefault(
            j.stage,
            {"stage": j.stage, "jobs": 0, "start": j.start - t0, "end": j.end - t0, "load": 0.0, "compute": 0.0},
        )
        s["jobs"] += 1
        s["start"] = min(s["start"], j.start - t0)
        s["end"] = max(s["end"], j.end - t0)
        s["load"] += j.load_seconds
        s["compute"] += j.compute_seconds
    for s in out.values():
        s["wall"] = s["end"] - s["start"]
    return sorted(out.values(), key=lambda s: (s["start"], s["stage"]))


def _predecessors(job: Job, jobs: list[Job]) -> list[tuple[Job, str]]:
    """(job, why) for every job this one waited for: its input (a judge waits for the generations of its
    cells) or its GPUs (an earlier job on the same host that held one of them)."""
    out = []
    if job.kind == "judge":
        out += [
            (j, "input") for j in jobs if j.kind == "generate" and not j.failed and _generator_dataset(j) in job.reads
        ]
    if job.gpus:
        held = set(job.gpus)
        out += [
            (j, "GPU")
            for j in jobs
            if j is not job and j.host == job.host and held & set(j.gpus) and j.end <= job.start + 1e-6
        ]
    return out


def _generator_dataset(job: Job) -> tuple:
    generator, _, dataset = job.stage.removeprefix("generate ").partition("/")
    return (generator, dataset)


def critical_path(jobs: list[Job], t0: float) -> list[dict]:
    """The chain that decided the run's length, from its first job to the last job to finish: each
    step is the job the next one waited for last, for its input or for its GPUs (`after`), with its
    start and end (from the window's start), load and compute seconds, and the wait since the step
    before it finished (merging, parsing, starting a process, waiting for a free core). `jobs` are one
    command's: a job whose input an earlier command made did not wait for it. It ends at the last job
    that succeeded."""
    done = [j for j in jobs if not j.failed]
    if not done:
        return []
    chain = [(max(done, key=lambda j: (j.end, j.start)), None)]
    while preds := _predecessors(chain[-1][0], jobs):
        # the latest to finish; on a tie the input, which the job needed either way
        chain.append(max(preds, key=lambda p: (p[0].end, p[1] == "input", p[0].start)))
    chain.reverse()
    out, prev_end = [], None
    for i, (j, _) in enumerate(chain):
        out.append(
            {
                "job": j.name,
                "after": chain[i - 1][1] if i else "",  # what it waited for in the step before: input or GPU
                "start": j.start - t0,
                "end": j.end - t0,
                "load": j.load_seconds,
                "compute": j.compute_seconds,
                "wait_before": None if prev_end is None else j.start - prev_end,
            }
        )
        prev_end = j.end
    return out
