"""Judge jobs: every cell a judge grades (generator x dataset, pairwise: against an opponent) in one
model load. The grading mode builds the judge requests, the engine runs them, the raw text is kept.

With `cascade`, items the mode's rule decides (exact matches) never reach the
judge model. With `verdict: logprob` each request is one forward pass that
scores the mode's labels after its marker. The item cache is keyed by the prompt
as sent (which holds the answer): adding a generator judges only its answers.

An answer the generator skipped (too long for its context, `on_too_long: skip`) is skipped here
too (pairwise: where either side's is). A request too long for the judge's context is skipped
where its dataset says `skip`, and otherwise fails its cell alone (`cell_errors` in the meta,
naming the cell and the item): the judge's other cells are judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from genjudge.config.experiment import Cell, cell_generations
from genjudge.config.jobs import JudgeJob
from genjudge.data.conversation import with_history
from genjudge.data.samples import SampleView, with_sample
from genjudge.data.sharding import shard_bounds
from genjudge.engine.completion import complete, completion_meta, prompt_set
from genjudge.engine.context import ADVICE
from genjudge.judging import modes
from genjudge.judging.modes.base import SKIPPED, JudgeRequest
from genjudge.judging.modes.pairwise import answers_by_turn
from genjudge.judging.template_rules import Templates
from genjudge.store.item_store import ItemStore
from genjudge.store.records import JudgeMeta, JudgeRecord, read_judge_records, write_judge_records


def cell_items(cells: list[Cell], generations: dict) -> pd.DataFrame:
    """Every (cell, item) the judge grades, in cell order; `generations` maps (generator, dataset) to a path."""
    frames = []
    for i, (_cell, gens) in enumerate(cell_generations(cells, generations)):
        # Each row's conversation up to its turn, before judge shards split an item's turns apart.
        g = with_history(gens)
        g.insert(0, "cell", i)
        frames.append(g)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["cell"])


def shard_slice(items: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    if len(items) < n_shards:  # cells skipped (their answers failed) left fewer items than judge shards
        return items.iloc[shard : shard + 1]
    a, b = shard_bounds(len(items), n_shards)[shard]
    return items.iloc[a:b]


def run_judge(job: JudgeJob, lease, log_stream, parallel: str = "device_map") -> JudgeMeta:
    """Judge the job's slice of its cells on `lease`. In a tensor-parallel group every rank runs this;
    only rank 0 writes."""
    from genjudge.engine import tensor_parallel

    spec = job.spec
    mode = modes.get(spec.mode)
    meta = JudgeMeta.start(
        lease,
        run=job.run,
        judge_shard=job.shard,
        model=spec.model,
        revision=spec.revision,
        mode=spec.mode,
        verdict=spec.verdict,
        cascade=spec.cascade,
        quantization=spec.quantization,
        device_map=spec.device_map,
        parallel=parallel,
        tensor_parallel_size=tensor_parallel.world_size() if tensor_parallel.active() else None,
        skipped_cells=job.skipped or {},
    )
    items = shard_slice(cell_items(list(job.cells), job.generations), job.shard, job.n_shards)
    templates = Templates(job.template_path, spec.templates, mode)
    asked = build_requests(job, mode, items, templates)
    c, pset = _complete(job, mode, asked, log_stream)
    _ask_again(job, mode, asked, c, log_stream)
    to_judge = asked.to_judge  # a list built on each read: once here
    results = {j: x for j, x in zip(to_judge, zip(c.prompts, c.results, c.keys)) if x[1] is not None}
    cell_errors = _too_long_for_the_judge(
        {to_judge[p]: reason for p, reason in c.too_long.items()},
        asked.requests,
        asked.owners,
        asked.why,
        job.on_too_long,
        job.log_path,
        spec,
    )
    missing = {to_judge[p]: w for p, w in c.incomplete.items()}
    for key, errors in _incomplete(missing, asked.requests, asked.owners, job.log_path, c.info.get("endpoint")).items():
        cell_errors.setdefault(key, errors)
    rows, per_cell = judge_rows(asked, results, cell_errors, c)
    if not tensor_parallel.is_writer():
        return meta
    write_judge_records(job.out_path, rows)
    requests = asked.requests
    meta.update(
        n_items=len(items),
        n_requests=len(requests),
        n_decided_by_rule=sum(r.decided_by == "rule" for r in requests),
        template=str(job.template_path),
        template_hash=templates.digest(),
        model_loads=1 if c.computed else 0,
        cells=per_cell,
        cell_errors=cell_errors,
        n_skipped=sum(r.decided_by == SKIPPED for r in rows),
        chat_date=getattr(pset, "stamped_date", None),
        **completion_meta(c, "judge_seconds"),
    )
    return meta.finish(job.meta_path)


@dataclass
class Asked:
    """The judge requests of a job's slice: each with the cell it belongs to; `why` (request index ->
    reason) those skipped, `systems` (request index -> system prompt) a template rule's own system
    prompt, `to_judge` the indices the judge model answers."""

    requests: list = field(default_factory=list)
    owners: list = field(default_factory=list)
    why: dict = field(default_factory=dict)
    systems: dict = field(default_factory=dict)

    @property
    def to_judge(self) -> list[int]:
        return [j for j, r in enumerate(self.requests) if r.decided_by == "judge"]


def build_requests(job: JudgeJob, mode, items: pd.DataFrame, templates: Templates) -> Asked:
    """Every request of the slice, cell by cell: the mode builds them from each template's items."""
    asked = Asked()
    for i, part in items.groupby("cell", sort=True):
        cell = job.cells[i]
        theirs = job.generations[(cell.opponent, cell.dataset)] if cell.opponent else None
        opponent = answers_by_turn(theirs) if cell.opponent else None
        gone = skipped_answers(part, theirs)
        for k, reason in gone.items():
            for order in range(mode.requests_of(part.loc[k])):
                asked.why[len(asked.requests)] = reason
                asked.requests.append(JudgeRequest(part.loc[k, "id"], order, SKIPPED, None, *_turn_sample(part, k)))
                asked.owners.append(cell)
        part = part.drop(index=list(gone))
        turns = part["turn"] if "turn" in part else [1] * len(part)
        chosen = [templates.choice(c, t) for c, t in zip(part["category"], turns)]
        for path, system in dict.fromkeys(chosen):  # each template's items in one call, in order of first use
            sub = part[[c == (path, system) for c in chosen]]
            reqs = mode.requests(sub, job.spec, templates.texts[path], opponent, (job.answers or {}).get(cell.dataset))
            if system is not None:
                asked.systems.update({len(asked.requests) + k: system for k in range(len(reqs))})
            asked.requests += reqs
            asked.owners += [cell] * len(reqs)
    return asked


def _complete(job: JudgeJob, mode, asked: Asked, log_stream):
    """The judge model's answers to the requests it is asked (the engine's Completion), and its prompt set."""
    spec = job.spec
    scorer, suffix, kind = None, "", "judge"
    if spec.verdict == "logprob":
        from genjudge.engine.completion import logprob_scorer

        marker = f"{mode.marker}:"
        scorer, suffix, kind = logprob_scorer(spec.engine, mode.logprob_labels, marker), marker, "judge-logprob"
    pset = prompt_set(
        spec,
        kind=kind,
        suffix=suffix,
        digests=job.digests,
        cache_dir=job.cache_dir,
        scorer=scorer,
        where=job.where,
        chat_date=job.chat_date,
    )
    if scorer is not None:
        pset.check_labels(mode.logprob_labels, suffix)  # refuse colliding labels before loading weights
    store = ItemStore(job.store_dir, job.writer)
    to_judge, systems = asked.to_judge, asked.systems
    c = complete(
        pset,
        [asked.requests[j].text for j in to_judge],
        [asked.requests[j].id for j in to_judge],
        store,
        f"judge {job.shard}" if job.n_shards > 1 else "judge",
        log_stream,
        scorer=scorer,
        keep_going=True,
        # A rule's own system prompt goes first, as the judge's would (the chat template renders both).
        conversations=[
            [{"role": "system", "content": systems[j]}, {"role": "user", "content": asked.requests[j].text}]
            if j in systems
            else None
            for j in to_judge
        ]
        if systems
        else None,
    )
    return c, pset


def _ask_again(job: JudgeJob, mode, asked: Asked, c, log_stream) -> None:
    """Replies that give no verdict (a mode that says which: `reply_parses`), asked again up to the mode's
    `retry_attempts`, each try under a key of its own (a killed job resumes try by try). Only where another
    try can differ: a judge behind an endpoint; a local judge decodes greedily and would write the same
    reply again. The first reply that parses, or the last, is the request's (in place in `c`)."""
    parses = getattr(mode, "reply_parses", None)
    attempts = mode.retry_attempts(job.spec) if parses is not None else 1
    if attempts <= 1 or job.spec.engine != "openai":
        return
    import logging

    from genjudge.engine.endpoint.stats import merged_stats

    log = logging.getLogger("judge")
    to_judge, parts = asked.to_judge, [c.info.get("endpoint")]
    bad = list(range(len(c.results)))
    for attempt in range(2, attempts + 1):
        # only the replies asked again in the last try can have changed: the others stay as read
        bad = [p for p in bad if c.results[p] is not None and not parses(c.results[p]["output"])]
        if not bad:
            break
        log.info("%d repl(ies) give no verdict: asking again (try %d of %d)", len(bad), attempt, attempts)
        pset = prompt_set(job.spec, kind=f"judge-try{attempt}", where=job.where)
        again = complete(
            pset,
            [asked.requests[to_judge[p]].text for p in bad],
            [asked.requests[to_judge[p]].id for p in bad],
            ItemStore(job.store_dir, job.writer),
            f"judge {job.shard}, try {attempt}" if job.n_shards > 1 else f"judge, try {attempt}",
            log_stream,
            keep_going=True,
        )
        parts.append(again.info.get("endpoint"))
        for q, p in enumerate(bad):
            if again.results[q] is not None:
                c.results[p] = {**again.results[q], "attempts": attempt}
                c.keys[p] = again.keys[q]
                c.computed_keys |= {again.keys[q]} & again.computed_keys
    c.info["endpoint"] = merged_stats(parts)


def judge_rows(asked: Asked, results: dict, cell_errors: dict, c) -> tuple[list, dict]:
    """(a raw row per request of the cells that did not fail, the counts per cell)."""
    rows, per_cell, attributed = [], {}, set()
    for j, (r, cell) in enumerate(zip(asked.requests, asked.owners)):
        if cell.key in cell_errors:  # failed alone: none of its rows, as for a cell whose answers failed
            continue
        base = dict(
            generator=cell.generator,
            dataset=cell.dataset,
            opponent=cell.opponent,
            id=r.id,
            order=r.order,
            decided_by=r.decided_by,
            turn=r.turn,
            sample=r.sample,
        )
        counts = per_cell.setdefault(cell.key, {"requests": 0, "resumed": 0, "shared": 0, "computed": 0})
        counts["requests"] += 1
        if j in asked.why:  # skipped, every request of its item (a pairwise order the judge answered too)
            rows.append(JudgeRecord(**{**base, "decided_by": SKIPPED}, skipped=asked.why[j]))
        elif j in results:
            prompt, res, key = results[j]
            rows.append(
                JudgeRecord(
                    **base,
                    judge_prompt=prompt,
                    judge_output=res["output"],
                    p_correct=res.get("p_correct"),
                    judge_n_prompt_tokens=int(res["n_prompt_tokens"]),
                    judge_n_generated_tokens=int(res["n_generated_tokens"]),
                    judge_finish_reason=res["finish_reason"],
                    judge_key=key,
                )
            )
            # A prompt computed now counts once, for the first cell that asked for it; the other cells' share it,
            # as they share a record another job of this command stored. Only the rest is from an earlier run.
            if key in c.computed_keys:
                counts["shared" if key in attributed else "computed"] += 1
            else:
                counts["shared" if key in c.shared_keys else "resumed"] += 1
            attributed.add(key)
        else:
            rows.append(JudgeRecord(**base))
    return rows, per_cell


def _turn_sample(part: pd.DataFrame, k) -> tuple[int, int]:
    turn = int(part.loc[k, "turn"]) if "turn" in part else 1
    return turn, int(part.loc[k, "sample"]) if "sample" in part else 0


def skipped_answers(part: pd.DataFrame, opponent_path=None) -> dict:
    """{row index: why} of the cell's answers not to judge: the generator skipped them, or (pairwise)
    the opponent skipped its side of the pair."""
    out = {}
    if "skipped" in part:
        out = {k: str(v) for k, v in part["skipped"].items() if isinstance(v, str)}
    if opponent_path is not None:
        import pyarrow.parquet as pq

        names = pq.read_schema(opponent_path).names
        if "skipped" in names:
            cols = [c for c in ("id", "turn", "sample", "skipped") if c in names]
            theirs = with_sample(pd.read_parquet(opponent_path, columns=cols))
            theirs = theirs if "turn" in theirs else theirs.assign(turn=1)
            reasons = {
                (i, int(t), int(s)): v
                for i, t, s, v in zip(theirs["id"], theirs["turn"], theirs["sample"], theirs["skipped"])
                if isinstance(v, str)
            }
            for k in part.index:
                if k not in out:
                    turn, sample = _turn_sample(part, k)
                    if (v := SampleView(reasons, sample).get((part.loc[k, "id"], turn))) is not None:
                        out[k] = f"the opponent's answer was skipped: {v}"
    return out


def _too_long_for_the_judge(over: dict, requests, owners, why: dict, on_too_long, log_path, spec) -> dict:
    """The requests too long for the judge's context (`over`: request index -> why): skipped with
    the rest of their item's requests where the dataset says skip (into `why`); otherwise the cell
    fails, with an error naming it and the item. Returns {cell key: [error]}."""
    import time

    errors: dict = {}
    of_item: dict = {}  # (cell, id, turn, sample) -> its requests (pairwise: both orders)
    for k, (r, owner) in enumerate(zip(requests, owners)):
        of_item.setdefault((owner, r.id, r.turn, r.sample), []).append(k)
    for j, reason in over.items():
        r, cell = requests[j], owners[j]
        if (on_too_long or {}).get(cell.dataset) == "skip":
            for k in of_item[(cell, r.id, r.turn, r.sample)]:
                why[k] = f"too long for the judge: {reason}"
            continue
        if cell.key in errors:
            continue
        where = f"item {r.id!r}" + (f", turn {r.turn}" if r.turn > 1 else "")
        errors[cell.key] = [
            {
                "type": "InputError",
                "message": f"cell {cell.key}: {where}: {reason}. {ADVICE}",
                "log": str(log_path or ""),
                "at": round(time.time(), 3),
            }
        ]
    return errors


def _incomplete(missing: dict, requests, owners, log_path, budget: dict | None = None) -> dict:
    """{cell key: [error]} for the cells of an endpoint judge whose requests got no result (`missing`:
    request index -> why: retries given up, or max_cost_usd reached). The cell is failed and listed,
    its answers counted in items (an item's two orders are one); its stored verdicts stay, and a rerun
    sends only the requests that have none. `budget`: the job's endpoint stats, to name a budget stop."""
    import time

    by_cell: dict = {}
    for j, reason in sorted(missing.items()):
        by_cell.setdefault(owners[j].key, []).append((requests[j], reason))
    errors = {}
    for key, got in by_cell.items():
        reasons = [r for _, r in got]
        items = len({(q.id, q.turn, q.sample) for q, _ in got})
        stopped = any("max_cost_usd" in r for r in reasons)
        if stopped:
            spent, limit = (budget or {}).get("cost_usd"), (budget or {}).get("max_cost_usd")
            earlier = (budget or {}).get("cost_usd_earlier_attempts") or 0.0
            money = f": ${(spent or 0.0) + earlier:.4f} of ${limit:g} spent" if limit is not None else ""
            message = (
                f"cell {key}: stopped by max_cost_usd{money}, {items} item(s) left without a verdict; the "
                f"verdicts received are stored: rerun with a larger max_cost_usd to finish (only the rest is sent)"
            )
        else:
            message = (
                f"cell {key}: {items} item(s) got no verdict, e.g. {reasons[0]}; the verdicts received are stored "
                f"and a rerun sends only the rest"
            )
        errors[key] = [
            {
                "type": "BudgetReached" if stopped else "EndpointIncomplete",
                "message": message,
                "items_left": items,
                "log": str(log_path or ""),
                "at": round(time.time(), 3),
            }
        ]
    return errors


def write_failed_judge(out_path, meta_path, error: dict, **identity) -> JudgeMeta:
    """A judge job that failed (genjudge.store.failures): no rows, and a meta with the error."""
    from genjudge.cluster.gpu_lease import Lease

    write_judge_records(out_path, [])
    meta = JudgeMeta.start(Lease([], "none"), error=error, **identity)
    return meta.finish(meta_path)


def merge_judge_shards(raw_paths, meta_paths, out_path, meta_out_path) -> None:
    """Concatenate data-parallel judge shards; the combined meta lists each shard's."""
    raw = pd.concat([read_judge_records(p) for p in raw_paths], ignore_index=True)
    keys = ["generator", "dataset", "opponent", "id", "turn", "sample", "order"]
    if with_sample(raw)[keys].astype(str).duplicated().any():
        raise ValueError("judge shards overlap: a (cell, id, turn, sample, order) appears twice")
    write_judge_records(out_path, raw)
    JudgeMeta.merged([JudgeMeta.read(p) for p in meta_paths]).write(meta_out_path)
