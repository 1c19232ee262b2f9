"""Typed, versioned records: job meta, raw judge rows and the run summary.

Each is written and read through its own type; every file carries the
`schema_version` it was written with, and reading a file of another version is
an error that says so rather than a KeyError later. docs/architecture.md's list of meta
fields is checked against these classes by the tests.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from dataclasses import asdict, dataclass, field, fields

import pandas as pd

from genjudge.cluster import slurm_job
from genjudge.store import atomic

SCHEMA_VERSION = 1

# Which `snakemake` command ran a job: the main process sets it while reading the workflow (rules/common.smk)
# and every job inherits it (local jobs from the process, SLURM jobs through sbatch's exported environment),
# so that the report tells the jobs of one command from those of a rerun.
INVOCATION_ENV = "GENJUDGE_INVOCATION"


def new_invocation() -> str:
    """An id for this command: its start (unix seconds) and process id."""
    return f"{time.time():.3f}-{os.getpid()}"


def invocation_started(invocation: str | None) -> float | None:
    """The unix seconds an id of `new_invocation` started at (None for none or another form)."""
    try:
        return float(str(invocation).split("-", 1)[0])
    except ValueError:
        return None


class RecordError(ValueError):
    pass


def _check_version(kind: str, found, path) -> None:
    if found != SCHEMA_VERSION:
        raise RecordError(
            f"{path}: {kind} written with schema_version {found!r}; this genjudge reads "
            f"{SCHEMA_VERSION}. Rerun the step that wrote it (or use the matching genjudge)."
        )


class _Record:
    @classmethod
    def from_dict(cls, data: dict, where="record"):
        _check_version(cls.__name__, data.get("schema_version"), where)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RecordError(f"{where}: unknown {cls.__name__} field(s) {unknown}")
        return cls(**data)

    @classmethod
    def read(cls, path):
        return cls.from_dict(json.loads(open(path, encoding="utf-8").read()), str(path))

    def to_dict(self) -> dict:
        return asdict(self)

    def update(self, **values) -> None:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise AttributeError(f"{type(self).__name__} has no field(s) {unknown}")
        for k, v in values.items():
            setattr(self, k, v)


@dataclass
class JobMeta(_Record):
    """Where and how one model job ran; written beside its output as `<output>.meta.json`."""

    schema_version: int = SCHEMA_VERSION
    run: str | None = None
    hostname: str | None = None
    pid: int | None = None
    slurm_job_id: str | None = None
    slurm_partition: str | None = None
    slurm_array: str | None = None  # <array job id>_<task id> for a task of a job array
    slurm_restarts: int = 0  # times SLURM requeued this job (preemption, scontrol requeue)
    invocation: str | None = None  # the snakemake command that ran the job (INVOCATION_ENV)
    python: str | None = None
    cuda_visible_devices: str | None = None
    gpu_source: str | None = None  # lease, slurm or none
    gpus: list = field(default_factory=list)
    waited_for_gpus_seconds: float = 0.0
    started_at: float | None = None  # unix seconds
    finished_at: float | None = None
    model: str | None = None
    revision: str | None = None
    model_fingerprint: str | None = None
    chat_template: bool | None = None
    chat_date: str | None = None  # the date the chat template stamped into the prompts (None: it stamps none)
    n_items: int = 0
    batch_size: int | None = None
    batch_choice: dict | None = None  # how batch_size was decided (planning.batch_choice.Choice), probes included
    batch_search_seconds: float = 0.0  # batch_size auto's probes (0: configured, remembered or on a CPU)
    compile: bool | None = None  # decoding on a static cache with a compiled forward (generator/judge.compile)
    compile_seconds: float = 0.0  # compiling it: the first call of each shape, beyond its steps' own time
    setup_seconds: float = 0.0  # tokenizer load and model fingerprint
    load_seconds: float = 0.0  # the model's weights; 0 when every item came from the item store
    resumed_items: int = 0  # taken from an earlier run's records in the item store
    shared_items: int = 0  # answered by an identical request of this run (a duplicate, another job's record)
    computed_items: int = 0
    tokens_per_second: float | None = None
    engine: str | None = None  # transformers, vllm or openai
    # vllm: its version, parallel sizes, dtype, KV cache; openai: its base URL, connections, batch
    engine_settings: dict | None = None
    # engine openai: requests, retries by cause, tokens, cost, budget, served models (engine.endpoint.run)
    endpoint: dict | None = None
    # Where the compute went (generating jobs; genjudge.planning.time_model's measured terms): batches, prompt
    # tokens without padding, seconds to each batch's first new token and after it, the steps after it.
    batches: int | None = None
    n_prompt_tokens: int | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    decode_steps: int | None = None
    max_new_tokens: int | None = None
    placement: dict | None = None  # parameters per device
    device: dict | None = None  # torch's view of the devices
    memory_plan: dict | None = None
    # A failed job (genjudge.store.failures): {type, message, log, at}; its outputs then hold no rows.
    error: dict | None = None

    @classmethod
    def start(cls, lease, **values):
        """A meta for a job that starts now, with the GPUs `lease` gave it."""
        meta = cls(
            hostname=socket.gethostname(),
            pid=os.getpid(),
            slurm_job_id=os.environ.get("SLURM_JOB_ID"),
            **slurm_job.job_info(),
            python=platform.python_version(),
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            invocation=os.environ.get(INVOCATION_ENV),
            gpu_source=lease.source,
            gpus=list(lease.devices),
            waited_for_gpus_seconds=round(lease.waited_seconds, 3),
            started_at=time.time(),
        )
        meta.update(**values)
        return meta

    def finish(self, path):
        self.finished_at = time.time()
        self.write(path)
        return self

    def write(self, path) -> None:
        atomic.write_json(path, self.to_dict())

    @property
    def wall_seconds(self) -> float:
        return round(self.finished_at - self.started_at, 3)


@dataclass
class GenerateMeta(JobMeta):
    generator: str | None = None  # the generator's name in the experiment
    dataset: str | None = None
    shard: int = 0
    n_samples: int = 1  # n_items counts rows: items x samples
    n_skipped: int = 0  # rows without an answer: too long for the context (dataset.on_too_long: skip)
    n_generated_tokens: int = 0
    # of the reasoning traces (generator.reasoning), by the generator's tokenizer; None: an endpoint's (none here)
    n_reasoning_tokens: int | None = 0
    n_reasoning_unfinished: int = 0  # rows whose trace never closed: no answer ("reasoning not finished")
    generate_seconds: float = 0.0


@dataclass
class JudgeMeta(JobMeta):
    judge_shard: int = 0
    mode: str | None = None
    verdict: str | None = None
    cascade: bool | None = None
    quantization: str | None = None
    device_map: str | None = None
    parallel: str | None = None  # device_map, tensor or replicas: how this job used its GPUs
    tensor_parallel_size: int | None = None  # ranks of the torchrun group (tensor)
    template: str | None = None
    template_hash: str | None = None
    n_requests: int = 0
    n_decided_by_rule: int = 0
    judge_seconds: float = 0.0
    model_loads: int = 0  # 1 when anything was left to judge: every cell in one load
    # "generator/dataset[ vs opponent]" -> {requests, resumed (earlier run), shared (this run), computed}
    cells: dict = field(default_factory=dict)
    shards: list | None = None  # the judge-shard metas, in a merged meta of several shards
    skipped_cells: dict = field(default_factory=dict)  # cell key -> the errors of its failed generation jobs
    cell_errors: dict = field(default_factory=dict)  # cell key -> errors of that cell alone (an item too long)
    n_skipped: int = 0  # requests not made: too long for a context (dataset.on_too_long: skip)

    @classmethod
    def from_dict(cls, data: dict, where="record"):
        meta = super().from_dict(data, where)
        if meta.shards:
            meta.shards = [m if isinstance(m, JudgeMeta) else JudgeMeta.from_dict(m, where) for m in meta.shards]
        return meta

    @classmethod
    def merged(cls, metas: list[JudgeMeta]) -> JudgeMeta:
        """One meta for data-parallel judge shards: sums and spans, each shard's meta kept."""
        if len(metas) == 1:
            return metas[0]
        first = metas[0]
        return cls(
            run=first.run,
            model=first.model,
            revision=first.revision,
            mode=first.mode,
            verdict=first.verdict,
            cascade=first.cascade,
            quantization=first.quantization,
            device_map=first.device_map,
            parallel=first.parallel,
            tensor_parallel_size=first.tensor_parallel_size,
            template=first.template,
            template_hash=first.template_hash,
            model_fingerprint=first.model_fingerprint,
            chat_date=first.chat_date,
            engine=first.engine,
            engine_settings=first.engine_settings,
            placement=first.placement,
            shards=metas,
            cuda_visible_devices=";".join(str(m.cuda_visible_devices) for m in metas),
            n_items=sum(m.n_items for m in metas),
            n_requests=sum(m.n_requests for m in metas),
            n_decided_by_rule=sum(m.n_decided_by_rule for m in metas),
            setup_seconds=round(sum(m.setup_seconds for m in metas), 3),
            load_seconds=round(sum(m.load_seconds for m in metas), 3),
            judge_seconds=round(sum(m.judge_seconds for m in metas), 3),
            resumed_items=sum(m.resumed_items for m in metas),
            shared_items=sum(m.shared_items for m in metas),
            computed_items=sum(m.computed_items for m in metas),
            model_loads=sum(m.model_loads for m in metas),
            **_sum_timing(metas),
            cells=_sum_cells(metas),
            skipped_cells=first.skipped_cells,
            cell_errors=_joined_errors(metas),
            n_skipped=sum(m.n_skipped for m in metas),
            error=next((m.error for m in metas if m.error), None),  # one failed shard fails the judge
            started_at=min(m.started_at for m in metas),
            finished_at=max(m.finished_at for m in metas),
        )

    def jobs(self) -> list[JudgeMeta]:
        return list(self.shards) if self.shards else [self]


def _sum_timing(metas: list[JobMeta]) -> dict:
    """The shards' timing fields summed (max_new_tokens: the largest), None where none has them."""
    out = {}
    for name in ("batches", "n_prompt_tokens", "prefill_seconds", "decode_seconds", "decode_steps"):
        values = [getattr(m, name) for m in metas if getattr(m, name) is not None]
        out[name] = sum(values) if values else None
    tokens = [m.max_new_tokens for m in metas if m.max_new_tokens is not None]
    out["max_new_tokens"] = max(tokens) if tokens else None
    return out


def _joined_errors(metas) -> dict:
    """Each cell's errors over the shards that met one."""
    out: dict = {}
    for m in metas:
        for cell, errors in m.cell_errors.items():
            out.setdefault(cell, []).extend(errors)
    return out


def _sum_cells(metas) -> dict:
    out: dict = {}
    for m in metas:
        for cell, counts in m.cells.items():
            acc = out.setdefault(cell, {k: 0 for k in counts})
            for k, v in counts.items():
                acc[k] = acc.get(k, 0) + v
    return out


@dataclass
class JudgeRecord:
    """One row of `judge/raw.parquet`: a judge call (or a rule's decision) and what came back."""

    generator: str
    dataset: str
    opponent: str | None
    id: str
    order: int
    decided_by: str
    turn: int = 1  # the conversation's turn graded
    judge_prompt: str | None = None
    judge_output: str | None = None
    p_correct: float | None = None
    judge_n_prompt_tokens: int = 0
    judge_n_generated_tokens: int = 0
    judge_finish_reason: str | None = None
    judge_key: str | None = None
    sample: int = 0  # the answer's sample index (generator.n_samples); files without it hold sample 0
    skipped: str | None = None  # decided_by "skipped": why (too long for the generator's or the judge's context)


RAW_COLUMNS = [f.name for f in fields(JudgeRecord)]
_VERSION_KEY = b"genjudge.schema_version"


def write_judge_records(path, rows: list[JudgeRecord] | pd.DataFrame) -> None:
    import pyarrow as pa

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame([asdict(r) for r in rows], columns=RAW_COLUMNS)
    df = df[RAW_COLUMNS].astype({"p_correct": "float64", "opponent": "object"})
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _VERSION_KEY: str(SCHEMA_VERSION).encode()})
    with atomic.atomic_path(path) as tmp:
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)


def read_judge_records(path, columns: list[str] | None = None) -> pd.DataFrame:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    found = meta.get(_VERSION_KEY)
    _check_version("judge records", int(found) if found else None, path)
    if columns is not None and "sample" in columns and "sample" not in pq.read_schema(path).names:
        columns = [c for c in columns if c != "sample"]  # written before samples: every row is sample 0
    df = pd.read_parquet(path, columns=columns)
    return df if "sample" in df.columns else df.assign(sample=0)


@dataclass
class RunSummary(_Record):
    """`report/summary.json`. The mode's measures (`metrics`) are written at the top level
    beside these fields, so a reference run has `accuracy`, a pairwise run `win`/`tie`/`loss`."""

    schema_version: int = SCHEMA_VERSION
    run: str = ""
    mode: str = ""
    n_items: int = 0  # items (ids; over several cells each dataset's once); an item's turns and samples are its answers
    # answers judged: items x turns x samples; over several cells the sum of theirs, one verdict each
    n_answers: int = 0
    n_cells: int = 1  # (generator, dataset, judge[, opponent]) combinations judged
    answers_per_item: str | None = None  # e.g. "3 samples per item"; None: one answer each
    n_judged: int = 0  # answers with a parsed verdict
    n_unparsed: int = 0
    unparsed_rate: float | None = None  # of the answers
    unparsed_reasons: dict = field(default_factory=dict)  # cause -> answers
    unparsed_examples: dict = field(default_factory=dict)  # cause -> [{id, detail}, ...] (how texts ended)
    n_skipped: int = 0  # answers left out: too long for a model's context (dataset.on_too_long: skip)
    skipped_items: list = field(default_factory=list)  # each of them: {[cell, judge,] id, turn, sample, reason}
    n_truncated: int = 0  # answers the generator cut at max_new_tokens (finish_reason "length")
    truncated_rate: float | None = None  # of the answers
    truncated_examples: list = field(default_factory=list)  # {id[, turn, sample], output_end}
    # Answers whose reasoning trace never closed (generator.reasoning): no answer, never judged (among
    # the unparsed, with their own reason), and the tokens of every trace.
    n_reasoning_unfinished: int = 0
    reasoning_unfinished_rate: float | None = None  # of the answers
    # why: {"token limit": answers, "end of sequence inside the trace": answers} (generator's finish reason)
    reasoning_unfinished_causes: dict = field(default_factory=dict)
    # report.unfinished_reasoning: the verdict those answers count as in the headline (None: left out)
    reasoning_unfinished_counted_as: str | None = None
    n_reasoning_tokens: int = 0
    accuracy: float | None = None
    accuracy_ci95: list | None = None
    exact_match: dict = field(default_factory=dict)
    exact_match_shown: bool = True  # whether exact match means something here (short references, or extraction)
    exact_match_note: str | None = None  # why it is shown or not
    answers_not_extracted: int = 0  # answers from which the dataset's extraction found nothing
    # exact match's answers found by a fallback heuristic (never by rule in the cascade): {how: answers}
    exact_match_fallbacks: dict = field(default_factory=dict)
    per_category: dict = field(default_factory=dict)
    placement_warnings: list = field(default_factory=list)
    # what the top of the report warns of: cells with more than a fifth of their verdicts unparsed
    warnings: list = field(default_factory=list)
    # each endpoint job's requests, retries, tokens and cost (report_html.endpoints)
    endpoints: list = field(default_factory=list)
    shards: list = field(default_factory=list)
    generator: dict = field(default_factory=dict)
    judge: dict = field(default_factory=dict)
    leaderboard: list = field(default_factory=list)  # one row per (generator, dataset, judge[, opponent])
    cells: dict = field(default_factory=dict)  # several cells: each cell's own summary, by its key
    across_cells: dict = field(default_factory=dict)  # judge -> measures over all its cells (e.g. strengths)
    paired: list = field(default_factory=list)  # paired differences of every two generators per judge and dataset
    validity: dict = field(default_factory=dict)  # agreement with human labels, bias diagnostics, panels
    time_model: dict = field(
        default_factory=dict
    )  # each job's predicted (genjudge.planning.time_model) and measured seconds
    table: dict = field(default_factory=dict)  # generators x (dataset, judge) headlines and mean ranks (report_table)
    failed_cells: list = field(default_factory=list)  # cells not judged: their generation or their judge failed
    metrics: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        metrics = out.pop("metrics")
        # A mode's rate of the headline (`accuracy` with its interval) is the field, flattened.
        clash = set(metrics) & set(out) - {"accuracy"}
        if clash:
            raise RecordError(f"mode measures {sorted(clash)} clash with summary fields")
        return {**out, **{k: v for k, v in metrics.items() if k not in out}}

    @classmethod
    def from_dict(cls, data: dict, where="summary"):
        _check_version(cls.__name__, data.get("schema_version"), where)
        known = {f.name for f in fields(cls)} - {"metrics"}
        return cls(
            **{k: v for k, v in data.items() if k in known}, metrics={k: v for k, v in data.items() if k not in known}
        )

    def write(self, path) -> None:
        atomic.write_json(path, self.to_dict())
