"""The whole run's wall-clock before it runs: the planned jobs placed on the GPUs they may use.

Jobs start as soon as their inputs are done (a judge waits for every generation job of the cells
it grades) and a node of their pool has enough free GPUs, in the order given, a later job taking
free GPUs an earlier one cannot use, as Snakemake's scheduler does. Locally a pool is one node
(`--resources gpu=N`: the inventory); on SLURM each role's pool is its nodes, a job on one node.
The critical path runs back from the last job to finish through what each job waited for last:
its inputs, or the job whose end freed its GPUs; as the report's timeline draws it after the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Job:
    name: str
    pool: str
    gpus: int  # GPUs on one node; 0 for a job on the CPU (one of the pool's slots)
    seconds: float
    after: list = field(default_factory=list)  # names of jobs whose outputs it reads


@dataclass
class Pool:
    name: str
    nodes: list  # GPUs (or CPU slots) per node
    label: str = ""


@dataclass
class Placed:
    job: Job
    start: float
    end: float
    node: int
    waited_for: str | None  # the job whose end let it start (None: it started at once)
    why: str = ""  # "input" or "GPUs"


@dataclass
class Schedule:
    placed: dict  # name -> Placed
    notes: list = field(default_factory=list)

    @property
    def total(self) -> float:
        return max((p.end for p in self.placed.values()), default=0.0)

    def critical_path(self) -> list[Placed]:
        if not self.placed:
            return []
        last = max(self.placed.values(), key=lambda p: p.end)
        path = [last]
        while path[-1].waited_for:
            path.append(self.placed[path[-1].waited_for])
        return path[::-1]


def schedule(jobs: list[Job], pools: dict) -> Schedule:
    """Place `jobs` on `pools` (name -> Pool); a job asking more GPUs than a node has gets a whole node."""
    notes = []
    free = {name: list(pool.nodes) for name, pool in pools.items()}
    for job in jobs:
        biggest = max(pools[job.pool].nodes)
        need = max(job.gpus, 1)
        if need > biggest:
            notes.append(f"{job.name} asks {need} GPUs, more than a node has ({biggest}): planned with {biggest}")
            job.gpus = biggest
    placed: dict = {}
    running: list[Placed] = []
    pending = list(jobs)
    t = 0.0
    last_event: dict = {}  # pool -> name of the job whose end freed its GPUs at time t
    while pending or running:
        started = True
        while started:
            started = False
            for job in list(pending):
                if any(d not in placed or placed[d].end > t for d in job.after):
                    continue
                need = max(job.gpus, 1)
                node = next((i for i, f in enumerate(free[job.pool]) if f >= need), None)
                if node is None:
                    continue
                free[job.pool][node] -= need
                deps = [placed[d] for d in job.after]
                dep = max(deps, key=lambda p: p.end) if deps else None
                if t == 0:
                    waited, why = None, ""
                elif dep is not None and dep.end == t:
                    waited, why = dep.job.name, "input"
                else:
                    waited, why = last_event.get(job.pool), "GPUs"
                p = Placed(job, t, t + job.seconds, node, waited, why)
                placed[job.name] = p
                running.append(p)
                pending.remove(job)
                started = True
        if not running:
            if pending:  # inputs that never finish: a bug in the caller's job list
                raise ValueError(f"jobs that can never start: {[j.name for j in pending]}")
            break
        t = min(p.end for p in running)
        for p in [p for p in running if p.end == t]:
            running.remove(p)
            free[p.job.pool][p.node] += max(p.job.gpus, 1)
            last_event[p.job.pool] = p.job.name
    return Schedule(placed, notes)
