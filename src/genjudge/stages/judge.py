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

import pandas as pd

from genjudge.config.experiment import Cell, cell_generations
from genjudge.config.specs import JudgeSpec
from genjudge.data.conversation import with_history
from genjudge.data.samples import SampleView, with_sample
from genjudge.data.sharding import shard_bounds
from genjudge.engine.completion import complete, completion_meta, prompt_set
from genjudge.engine.context import ADVICE
from genjudge.judging import modes
from genjudge.judging.modes.base import SKIPPED, JudgeRequest
from genjudge.judging.modes.pairwise import answers_by_turn
from genjudge.judging.template_rules import Templates
from genjudge.models.modelref import DigestIndex
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


def run_judge(
    *,
    cells: list[Cell],
    generations: dict,
    out_path,
    meta_path,
    spec: JudgeSpec,
    template_path,
    store_dir,
    run: str,
    lease,
    log_stream,
    shard: int = 0,
    n_shards: int = 1,
    answers: dict | None = None,
    parallel: str = "device_map",
    skipped: dict | None = None,
    digests: DigestIndex | None = None,
    cache_dir=None,
    on_too_long: dict | None = None,
    log_path: str | None = None,
    where: str = "judge",
    chat_date: str | None = None,
    judge_name: str = "",
) -> JudgeMeta:
    """`answers` maps a dataset to its extraction methods before exact match (for the cascade);
    `template_path` is the template of every item no rule of `spec.templates` chooses one for;
    `skipped`: the cells left out because their answers failed (cell key -> errors), for the meta;
    `on_too_long`: each dataset's setting (fail where it names none); `log_path`: the job's log, named
    in a cell's error; `where`: the judge's config key (an endpoint's errors name it); `chat_date`: the
    run's pinned date (genjudge.store.chat_date); `judge_name`: the judge's name (its item store writer's,
    so that each judge's attempts are its own). In a tensor-parallel group every rank runs this; only
    rank 0 writes."""
    from genjudge.engine import tensor_parallel

    mode = modes.get(spec.mode)
    meta = JudgeMeta.start(
        lease,
        run=run,
        judge_shard=shard,
        model=spec.model,
        revision=spec.revision,
        mode=spec.mode,
        verdict=spec.verdict,
        cascade=spec.cascade,
        quantization=spec.quantization,
        device_map=spec.device_map,
        parallel=parallel,
        tensor_parallel_size=tensor_parallel.world_size() if tensor_parallel.active() else None,
        skipped_cells=skipped or {},
    )
    items = shard_slice(cell_items(cells, generations), shard, n_shards)
    templates = Templates(template_path, spec.templates, mode)
    requests, owners, why = [], [], {}  # why: request index -> the reason it is skipped
    systems: dict = {}  # request index -> its template rule's own system prompt
    for i, part in items.groupby("cell", sort=True):
        cell = cells[i]
        opponent = answers_by_turn(generations[(cell.opponent, cell.dataset)]) if cell.opponent else None
        gone = skipped_answers(part, generations[(cell.opponent, cell.dataset)] if cell.opponent else None)
        for k, reason in gone.items():
            for order in range(mode.requests_per_item):
                why[len(requests)] = reason
                requests.append(JudgeRequest(part.loc[k, "id"], order, SKIPPED, None, *_turn_sample(part, k)))
                owners.append(cell)
        part = part.drop(index=list(gone))
        turns = part["turn"] if "turn" in part else [1] * len(part)
        chosen = [templates.choice(c, t) for c, t in zip(part["category"], turns)]
        for path, system in dict.fromkeys(chosen):  # each template's items in one call, in order of first use
            sub = part[[c == (path, system) for c in chosen]]
            reqs = mode.requests(sub, spec, templates.texts[path], opponent, (answers or {}).get(cell.dataset))
            if system is not None:
                systems.update({len(requests) + k: system for k in range(len(reqs))})
            requests += reqs
            owners += [cell] * len(reqs)
    to_judge = [j for j, r in enumerate(requests) if r.decided_by == "judge"]

    scorer, suffix, kind = None, "", "judge"
    if spec.verdict == "logprob":
        from genjudge.engine.completion import logprob_scorer

        marker = f"{mode.marker}:"
        scorer, suffix, kind = logprob_scorer(spec.engine, mode.logprob_labels, marker), marker, "judge-logprob"
    pset = prompt_set(
        spec,
        kind=kind,
        suffix=suffix,
        digests=digests,
        cache_dir=cache_dir,
        scorer=scorer,
        where=where,
        chat_date=chat_date,
    )
    if scorer is not None:
        pset.check_labels(mode.logprob_labels, suffix)  # refuse colliding labels before loading weights
    # The writer names the job: a budget counts what this judge's earlier attempts stored, no other judge's.
    store = ItemStore(store_dir, f"{run}-{judge_name}-judge{shard}" if judge_name else f"{run}-judge{shard}")
    c = complete(
        pset,
        [requests[j].text for j in to_judge],
        [requests[j].id for j in to_judge],
        store,
        f"judge {shard}" if n_shards > 1 else "judge",
        log_stream,
        scorer=scorer,
        keep_going=True,
        # A rule's own system prompt goes first, as the judge's would (the chat template renders both).
        conversations=[
            [{"role": "system", "content": systems[j]}, {"role": "user", "content": requests[j].text}]
            if j in systems
            else None
            for j in to_judge
        ]
        if systems
        else None,
    )
    results = {j: x for j, x in zip(to_judge, zip(c.prompts, c.results, c.keys)) if x[1] is not None}
    cell_errors = _too_long_for_the_judge(
        {to_judge[p]: reason for p, reason in c.too_long.items()}, requests, owners, why, on_too_long, log_path, spec
    )
    missing = {to_judge[p]: w for p, w in c.incomplete.items()}
    for key, errors in _incomplete(missing, requests, owners, log_path, c.info.get("endpoint")).items():
        cell_errors.setdefault(key, errors)
    rows, per_cell, attributed = [], {}, set()
    for j, (r, cell) in enumerate(zip(requests, owners)):
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
        if j in why:  # skipped, every request of its item (a pairwise order the judge answered too)
            rows.append(JudgeRecord(**{**base, "decided_by": SKIPPED}, skipped=why[j]))
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
    if not tensor_parallel.is_writer():
        return meta
    write_judge_records(out_path, rows)
    meta.update(
        n_items=len(items),
        n_requests=len(requests),
        n_decided_by_rule=sum(r.decided_by == "rule" for r in requests),
        template=str(template_path),
        template_hash=templates.digest(),
        model_loads=1 if c.computed else 0,
        cells=per_cell,
        cell_errors=cell_errors,
        n_skipped=sum(r.decided_by == SKIPPED for r in rows),
        chat_date=getattr(pset, "stamped_date", None),
        **completion_meta(c, "judge_seconds"),
    )
    return meta.finish(meta_path)


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
