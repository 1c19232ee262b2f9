"""One cell's figures for summary.json beside its measures: the answers cut short, unfinished or
unparsed, exact match, where its jobs ran, its categories and leaderboard row (genjudge.stages.report
puts them together)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from genjudge.judging import modes
from genjudge.judging.answer_rules import extracts
from genjudge.judging.items import count_items, item_rate_where
from genjudge.judging.reasoning import UNCLOSED, unfinished_cause
from genjudge.store.records import GenerateMeta, JudgeMeta, RunSummary


def fallback_counts(df: pd.DataFrame) -> dict:
    """{how: answers} of the answers exact match read by a fallback heuristic (not strictly)."""
    if "answer_strict" not in df:
        return {}
    loose = (
        df["exact_match"].notna() & df["answer_extraction"].notna() & ~df["answer_strict"].fillna(False).astype(bool)
    )
    return {str(k): int(v) for k, v in df["answer_extraction"][loose].value_counts().items()}


def served(section: dict, metas) -> dict:
    """Where a model behind an endpoint was served: its public base URL and the model ids the server
    named (nothing for a local model, whose quantization and GPUs say where it ran)."""
    if section.get("engine") != "openai":
        return {}
    from genjudge.models.endpoints import public_url

    ids = sorted({str(k) for m in metas for k in ((m.endpoint or {}).get("served_models") or {})})
    return {"engine": "openai", "base_url": public_url(section["endpoint"]["base_url"] or ""), "served_models": ids}


def on_cpu_despite_lease(meta) -> bool:
    """A job that leased GPUs (CUDA_VISIBLE_DEVICES set) and loaded its model where torch saw no CUDA."""
    return bool(meta.cuda_visible_devices) and (meta.device or {}).get("cuda_available") is False


def counted_as(df: pd.DataFrame, unfinished: pd.Series) -> str | None:
    """The verdict the unfinished answers count as (report.unfinished_reasoning), None where left out."""
    verdicts = df.loc[unfinished & df["verdict"].notna(), "verdict"]
    return str(verdicts.iloc[0]) if len(verdicts) else None


def unfinished_causes(df: pd.DataFrame, unfinished: pd.Series) -> dict:
    """{cause: answers} of the traces that never closed: the token limit, or an end of sequence inside them."""
    finish = df["finish_reason"] if "finish_reason" in df else pd.Series(None, index=df.index)
    out: dict = {}
    for f in finish[unfinished]:
        cause = unfinished_cause(f)
        out[cause] = out.get(cause, 0) + 1
    return out


# How judgments parsed before causes and details were apart wrote them: the detail inside the reason.
_LEGACY = [
    (re.compile(r"^(?P<cause>.*?); (?P<detail>the text ends: \.\.\..*)$", re.S), "{cause}"),
    (re.compile(r"^score (?P<detail>\S+) outside (?P<range>.+)$"), "score outside {range}"),
    (re.compile(r"^label (?P<detail>.+) is not one of (?P<labels>\[.*\])$"), "label not one of {labels}"),
]


def cause_of(reason: str, detail) -> tuple[str, str | None]:
    """(cause, detail) of an unparsed verdict; a reason written with its detail inside is split."""
    if isinstance(detail, str) and detail:
        return reason, detail
    for rx, cause in _LEGACY:
        m = rx.match(reason)
        if m:
            d = m.group("detail")
            if cause.startswith("score"):
                d = f"score {d}"
            elif cause.startswith("label"):
                d = f"label {d}"
            return cause.format(**m.groupdict()), d
    return reason, None


def unparsed_causes(df: pd.DataFrame, n_examples: int) -> tuple[dict, dict]:
    """({cause: answers}, {cause: the first n_examples [{id, detail}]}), causes most frequent first."""
    rows = df[[c for c in ("id", "unparsed_reason", "unparsed_detail") if c in df]][
        df["unparsed_reason"].notna().to_numpy()
    ]
    details = rows["unparsed_detail"] if "unparsed_detail" in rows else pd.Series(None, index=rows.index)
    counts: dict = {}
    examples: dict = {}
    for item, reason, detail in zip(rows["id"], rows["unparsed_reason"], details):
        cause, d = cause_of(str(reason), detail)
        counts[cause] = counts.get(cause, 0) + 1
        if d and len(examples.setdefault(cause, [])) < n_examples:
            examples[cause].append({"id": str(item), "detail": d})
    order = sorted(counts, key=lambda c: -counts[c])
    return {c: counts[c] for c in order}, {c: examples[c] for c in order if examples.get(c)}


SHORT_WORDS = 5  # a short answer: at most this many words
SHORT_SHARE = 0.9  # of the references that are there


def exact_match_fits(df: pd.DataFrame, dataset: dict | None) -> tuple[bool, str]:
    """Whether normalised exact match means something for these answers, and why: the dataset
    extracts an answer before comparing (`answer`, for every item or for some categories), or its
    references are short answers (at most SHORT_WORDS words in SHORT_SHARE of them). Against long
    open-ended references it is ~0% noise."""
    if extracts((dataset or {}).get("answer")):
        return True, "the dataset extracts the answer before comparing (answer)"
    refs = [str(r) for r in df["reference"] if isinstance(r, str) and r.strip()] if "reference" in df else []
    if not refs:
        return False, "no item has a reference"
    short = sum(len(r.split()) <= SHORT_WORDS for r in refs) / len(refs)
    if short >= SHORT_SHARE:
        return True, f"the references are short answers ({short:.0%} of at most {SHORT_WORDS} words)"
    return False, (
        f"the references are not short answers (only {short:.0%} of at most {SHORT_WORDS} words) and the dataset "
        "extracts no answer (answer.reference / answer.candidate)"
    )


def truncated_answers(df: pd.DataFrame) -> pd.Series:
    """Which answers the generator cut at max_new_tokens (all False for judgments that do not say)."""
    if "finish_reason" not in df:
        return pd.Series(False, index=df.index)
    return df["finish_reason"].eq("length").fillna(False).astype(bool)


def truncated_examples(df: pd.DataFrame, cut: pd.Series, n: int, width: int = 160) -> list[dict]:
    """The first `n` truncated answers: their item (turn, sample where items have several) and how the text ends."""
    several = [k for k in ("turn", "sample") if k in df and df[k].nunique() > 1]
    rows = np.flatnonzero(cut.to_numpy(dtype=bool))[:n]
    if not len(rows):
        return []
    out = []
    for row in df[["id", *several, "output"]].iloc[rows].itertuples():
        ex = {"id": str(row.id), **{k: int(getattr(row, k)) for k in several}}
        text = " ".join(str(row.output or "").split())
        ex["output_end"] = text if len(text) <= width else "..." + text[-width:]
        out.append(ex)
    return out


def exact_match_rate(df: pd.DataFrame) -> dict:
    """Normalised exact match over the answers that have a reference, clustered by item."""
    has = df["exact_match"].notna().to_numpy()
    return item_rate_where(df, has, df["exact_match"][has].astype(bool))


def category_frame(s: RunSummary) -> pd.DataFrame:
    """The per-category table as a flat frame (values and interval bounds)."""
    rows = []
    for cat, c in s.per_category.items():
        row = {"category": cat}
        for k, v in c.items():
            if isinstance(v, dict) and "value" in v:
                row[k] = v["value"]
                if v.get("ci95"):
                    row[f"{k}_ci95_low"], row[f"{k}_ci95_high"] = v["ci95"]
            elif not isinstance(v, dict):
                row[k] = v
        rows.append(row)
    return pd.DataFrame(rows)


def leaderboard_row(s: RunSummary, generator: str, dataset: str, judge: str, opponent: str | None) -> dict:
    return {
        "generator": generator,
        "dataset": dataset,
        "judge": judge,
        "opponent": opponent,
        "mode": s.mode,
        "n_items": s.n_items,
        "n_answers": s.n_answers,
        "n_judged": s.n_judged,
        "n_unparsed": s.n_unparsed,
        "n_truncated": s.n_truncated,
        "truncated_rate": s.truncated_rate,
        **modes.get(s.mode).leaderboard(s.to_dict()),
        "exact_match": s.exact_match,
        "exact_match_shown": s.exact_match_shown,
        "exact_match_note": s.exact_match_note,  # why it is shown or not: the page's note under the leaderboard
    }


def split_skipped(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the judgments the report counts, the answers skipped as too long for a context)."""
    if "skipped" not in df:
        return df, df.iloc[0:0]
    gone = df["skipped"].notna()
    return df[~gone].reset_index(drop=True), df[gone].reset_index(drop=True)


def skipped_list(df: pd.DataFrame) -> list[dict]:
    """The skipped answers of one cell: {id, turn, sample, reason}, in the judgments' order."""
    turns = df["turn"] if "turn" in df else [1] * len(df)
    samples = df["sample"] if "sample" in df else [0] * len(df)
    return [
        {"id": str(i), "turn": int(t), "sample": int(s), "reason": str(r)}
        for i, t, s, r in zip(df["id"], turns, samples, df["skipped"])
    ]


def _shard_rows(gen_metas) -> list[dict]:
    return [
        {
            "generator": m.generator,
            "dataset": m.dataset,
            "shard": m.shard,
            "n_items": m.n_items,
            "cuda_visible_devices": m.cuda_visible_devices,
            "hostname": m.hostname,
            "setup_seconds": m.setup_seconds,
            "load_seconds": m.load_seconds,
            "generate_seconds": m.generate_seconds,
            "resumed_items": m.resumed_items,
            "shared_items": m.shared_items,
            "computed_items": m.computed_items,
            "tokens_per_second": m.tokens_per_second,
            "wall_seconds": m.wall_seconds,
        }
        for m in sorted(gen_metas, key=lambda m: (m.generator or "", m.dataset or "", m.shard))
    ]


def category_summaries(df: pd.DataFrame, mode, options: dict) -> dict:
    """{category: its counts and measures} of one cell's judgments, categories in order."""
    per_cat = {}
    for cat, g in df.groupby(df["category"].fillna("(none)"), sort=True):
        per_cat[str(cat)] = {
            "n_items": count_items(g),
            "n_answers": len(g),
            "n_judged": int(g["verdict"].notna().sum()),
            "n_unparsed": int(g["verdict"].isna().sum()),
            "n_truncated": int(truncated_answers(g).sum()),
            **(
                {"n_reasoning_unfinished": int(g["reasoning_state"].eq(UNCLOSED).sum())}
                if "reasoning_state" in g
                else {}
            ),
            "exact_match": exact_match_rate(g),
            **mode.measures(g, options),
        }
    return per_cat


def placement_warnings(gen_metas: list[GenerateMeta], judge_meta: JudgeMeta) -> list[str]:
    """The jobs that ran where they were not meant to: layers offloaded, or leased GPUs left unused."""
    warnings = []
    for m in [*gen_metas, *judge_meta.jobs()]:
        mp = m.memory_plan or {}
        if mp.get("offloaded_to"):
            who = f"shard {m.shard}" if isinstance(m, GenerateMeta) else "judge"
            warnings.append(
                f"{who}: the memory plan put layers on {', '.join(mp['offloaded_to'])} ({mp.get('recommendation', '')})"
            )
        if on_cpu_despite_lease(m):
            who = f"shard {m.shard}" if isinstance(m, GenerateMeta) else "judge"
            warnings.append(
                f"{who}: leased GPU(s) {m.cuda_visible_devices} but ran on the CPU: torch saw no CUDA device "
                "(no GPU there, or none of these ids exists on that machine: check gpu_inventory)"
            )
    return warnings


def generator_section(g: dict, gen_metas: list[GenerateMeta]) -> dict:
    """summary.json's `generator` of one cell: the model and its shards' seconds and items."""
    return {
        "model": g["model"],
        **served(g, gen_metas),
        "revision": g["revision"],
        "max_new_tokens": g["max_new_tokens"],
        "load_seconds": round(sum(m.load_seconds for m in gen_metas), 3),
        "generate_seconds": round(sum(m.generate_seconds for m in gen_metas), 3),
        "resumed_items": sum(m.resumed_items for m in gen_metas),
        "shared_items": sum(m.shared_items for m in gen_metas),
        "computed_items": sum(m.computed_items for m in gen_metas),
    }


def judge_section(j: dict, mode, judge_meta: JudgeMeta) -> dict:
    """summary.json's `judge` of one cell: the model, how it judged, and its job's seconds and items."""
    return {
        "model": j["model"],
        **served(j, judge_meta.jobs()),
        "mode": mode.name,
        "verdict": j["verdict"],
        "cascade": j["cascade"],
        "quantization": j["quantization"],
        "shards": j["shards"],
        "cuda_visible_devices": judge_meta.cuda_visible_devices,
        "ran_on_cpu": any(on_cpu_despite_lease(m) for m in judge_meta.jobs()),  # despite its GPUs' lease
        "placement": judge_meta.placement,
        "setup_seconds": judge_meta.setup_seconds,
        "load_seconds": judge_meta.load_seconds,
        "judge_seconds": judge_meta.judge_seconds,
        "resumed_items": judge_meta.resumed_items,
        "shared_items": judge_meta.shared_items,
        "computed_items": judge_meta.computed_items,
    }
