"""One generation job: a shard of items in, one output row per item, sample and turn out
(`generator.n_samples`, default 1: rows are keyed by id + sample + turn).

An item whose prompt does not fit the generator's context stops the job (`on_too_long: fail`), or
(`skip`) gets rows without an answer whose `skipped` says why, from that turn on: the judges and
the report leave them out and list them. A conversation whose turn's reasoning never closed has no
answer to continue from: its later turns are skipped the same way, whatever `on_too_long` says."""

from __future__ import annotations

import json

import pandas as pd

from genjudge.config.jobs import GenerateJob
from genjudge.data.conversation import history_messages, item_turns
from genjudge.data.dataset import is_missing
from genjudge.data.shard_files import read_shard
from genjudge.engine.completion import combined, complete, completion_meta, prompt_set
from genjudge.judging import reasoning
from genjudge.store import atomic
from genjudge.store.item_store import ItemStore
from genjudge.store.records import GenerateMeta

OUTPUT_COLUMNS = [
    "id",
    "sample",
    "turn",
    "prompt_sent",
    "output",  # the answer: after the reasoning trace where there is one (generator.reasoning)
    "reasoning",  # the trace, markers left out; None where there is none
    "reasoning_state",  # closed, unclosed (no answer: "reasoning not finished") or absent
    "n_prompt_tokens",
    "n_generated_tokens",
    "finish_reason",
    "key",
    "skipped",  # why the item has no answer (too long for the context, on_too_long: skip); null otherwise
]


def run_generate(job: GenerateJob, lease, log_stream) -> GenerateMeta:
    """Generate every item of the job's shard (resumed from the item store)."""
    spec, shard = job.spec, job.shard
    if job.threads is not None and spec.engine != "openai":  # an endpoint job imports no torch
        from genjudge.engine.threads import set_threads

        set_threads(job.threads)
    meta = GenerateMeta.start(
        lease,
        shard=int(shard),
        run=job.run,
        model=spec.model,
        revision=spec.revision,
        generator=job.generator,
        dataset=job.dataset,
    )
    pset = prompt_set(
        spec, kind="generate", digests=job.digests, cache_dir=job.cache_dir, where=job.where, chat_date=job.chat_date
    )
    store = ItemStore(job.store_dir, job.writer)
    on_too_long, out_path, meta_path = job.on_too_long, job.out_path, job.meta_path
    items = read_shard(job.shard_path)
    turns = [item_turns(p, r, t) for p, r, t in zip(items["prompt"], items["reference"], items["turns"])]
    chats = [None if is_missing(m) else json.loads(m) for m in items["messages"]]
    n = int(spec.n_samples)
    # Each (item, sample) is a conversation of its own: sample s's turn k follows its own answers.
    threads = [(i, s) for i in range(len(items)) for s in range(n)]
    rows, completions = [], []
    answers: dict = {t: [] for t in threads}
    skipped: dict = {}  # (item, sample) -> why its later turns are skipped
    # Turn k needs each item's answers to turns 1..k-1: the turns run in order, one completion
    # each (one model load), every (item, sample, turn) its own cached record.
    most = max((len(t) for t in turns), default=1)
    thinking = spec.reasoning
    shows = pset.chat and reasoning.template_shows(getattr(pset.tok, "chat_template", None), thinking)
    for k in range(1, most + 1):
        for i, s in threads:
            if (i, s) in skipped and len(turns[i]) >= k:  # a later turn of a skipped conversation
                rows.append(_skipped_row(items["id"].iloc[i], s, k, skipped[(i, s)]))
        idx = [(i, s) for i, s in threads if len(turns[i]) >= k and (i, s) not in skipped]
        if not idx and k > 1:
            continue
        questions = [[q["question"] for q in turns[i][:k]] for i, _ in idx]
        conversations = [
            chats[i] if k == 1 else history_messages(q, answers[(i, s)]) for (i, s), q in zip(idx, questions)
        ]
        ids = [items["id"].iloc[i] for i, _ in idx]
        samples = [s for _, s in idx]
        desc = f"shard {shard}" if most == 1 else f"shard {shard}, turn {k}"
        c = complete(
            pset,
            [q[-1] for q in questions],
            ids,
            store,
            desc,
            log_stream,
            conversations=conversations,
            samples=samples if spec.do_sample else None,
            keep_going=on_too_long == "skip",
        )
        completions.append(c)
        if c.incomplete:  # an endpoint's: what came back is stored, and a rerun sends only the rest
            _refuse_incomplete(c, desc, ids)
        rows += _turn_rows(c, k, idx, ids, turns, answers, skipped, thinking, shows)
    _in_item_order(rows, items["id"])
    c = combined(completions)
    out = pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
    atomic.write_parquet(out_path, out)
    meta.update(
        n_items=len(out),  # rows: items x samples x turns
        n_skipped=int(out["skipped"].notna().sum()),
        n_samples=n,
        n_generated_tokens=int(out["n_generated_tokens"].sum()),
        n_reasoning_tokens=reasoning_tokens(pset.tok, out["reasoning"]),
        n_reasoning_unfinished=int((out["reasoning_state"] == reasoning.UNCLOSED).sum()),
        chat_date=getattr(pset, "stamped_date", None),
        **completion_meta(c, "generate_seconds"),
    )
    return meta.finish(meta_path)


def _refuse_incomplete(c, desc: str, ids: list) -> None:
    """Stop the job where an endpoint left answers without a result (a rerun sends only those)."""
    from genjudge.errors import InputError

    first = min(c.incomplete)
    e = c.info.get("endpoint") or {}
    if e.get("budget_stopped"):
        spent = (e.get("cost_usd") or 0.0) + (e.get("cost_usd_earlier_attempts") or 0.0)
        raise InputError(
            f"{desc}: stopped by max_cost_usd: ${spent:.4f} of ${e['max_cost_usd']:g} spent, "
            f"{len(c.incomplete)} of {len(ids)} answer(s) left; the answers received are stored: rerun "
            f"with a larger max_cost_usd to finish (only the rest is sent)"
        )
    raise InputError(
        f"{desc}: {len(c.incomplete)} of {len(ids)} answer(s) got no result, e.g. item {ids[first]!r}: "
        f"{c.incomplete[first]}; the answers received are stored and a rerun sends only the rest"
    )


def _turn_rows(
    c, k: int, idx: list, ids: list, turns: list, answers: dict, skipped: dict, thinking, shows
) -> list[dict]:
    """The rows of turn k's completion `c`; each conversation's answer joins `answers` (the history of its next
    turn), and one that cannot go on joins `skipped`."""
    out = []
    for j, ((i, s), item_id, p, r, key) in enumerate(zip(idx, ids, c.prompts, c.results, c.keys)):
        if j in c.too_long:
            why = f"too long for the generator (turn {k}): {c.too_long[j]}"
            skipped[(i, s)] = f"an earlier turn was skipped: {why}"
            out.append(_skipped_row(item_id, s, k, why, p))
            continue
        part = reasoning.split(r["output"], thinking, shows, reasoning.prompt_opens(p, thinking))
        answers[(i, s)].append(part.answer)  # a later turn's history holds the answer, not the trace
        if part.state == reasoning.UNCLOSED and len(turns[i]) > k:
            # no answer for the next turn to follow: the turns after it are skipped, never generated
            # from an empty reply
            skipped[(i, s)] = f"the reasoning of turn {k} never closed: no answer to continue from"
        out.append(
            {
                "id": item_id,
                "sample": s,
                "turn": k,
                "prompt_sent": p,
                "output": part.answer,
                "reasoning": part.reasoning,
                "reasoning_state": part.state,
                "n_prompt_tokens": int(r["n_prompt_tokens"]),
                "n_generated_tokens": int(r["n_generated_tokens"]),
                "finish_reason": r["finish_reason"],
                "key": key,
                "skipped": None,
                "_order": (i, s, k),
            }
        )
    return out


def _in_item_order(rows: list[dict], item_ids) -> None:
    """Sort the rows in place: item order, then sample, then turn."""
    position = {item_id: i for i, item_id in enumerate(item_ids)}
    for row in rows:
        if "_order" not in row:
            row["_order"] = (position[row["id"]], row["sample"], row["turn"])
    rows.sort(key=lambda row: row.pop("_order"))


def reasoning_tokens(tok, traces) -> int | None:
    """Tokens of the reasoning traces, counted by the generator's tokenizer (None without one: an endpoint's)."""
    if tok is None:
        return None
    texts = [t for t in traces if isinstance(t, str) and t]
    return sum(len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]) if texts else 0


def _skipped_row(item_id, sample: int, turn: int, why: str, prompt: str | None = None) -> dict:
    """The row of an answer not generated: its item's prompt did not fit (now or at an earlier turn), or
    an earlier turn's reasoning never closed."""
    return {
        "id": item_id,
        "sample": sample,
        "turn": turn,
        "prompt_sent": prompt,
        "output": None,
        "n_prompt_tokens": 0,
        "n_generated_tokens": 0,
        "finish_reason": None,
        "key": None,
        "skipped": why,
    }


def write_failed_shard(out_path, meta_path, error: dict, **identity) -> GenerateMeta:
    """A shard whose job failed (genjudge.store.failures): no rows, and a meta with the error."""
    from genjudge.cluster.gpu_lease import Lease

    atomic.write_parquet(out_path, pd.DataFrame(columns=OUTPUT_COLUMNS))
    meta = GenerateMeta.start(Lease([], "none"), error=error, **identity)
    return meta.finish(meta_path)
