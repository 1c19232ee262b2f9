"""report.md's text: a cell's page (`render_markdown`), the leaderboard and the experiment's page
(`render_experiment`), and the time model's table. The figures come from genjudge.stages.report."""

from __future__ import annotations

import json

import pandas as pd

from genjudge.judging import modes, paired, sampling_stats
from genjudge.judging.headline import headline_rows, truncated_text
from genjudge.judging.items import turn_table
from genjudge.judging.modes.base import pct, rate_text
from genjudge.judging.reasoning import LIMIT, unfinished_advice
from genjudge.judging.tables import failed_pairs, markdown_table, md_code, md_line, md_text
from genjudge.stages import controlled
from genjudge.store.records import RunSummary

SKIPPED_SHOWN = 50  # skipped answers listed in report.md per cell (summary.json lists every one)


def intervals_note(clustered: bool) -> str:
    """What n counts and what the intervals are, under a headline or a leaderboard."""
    note = (
        "n counts items. Rates have 95% Wilson intervals, mean scores 95% normal intervals; unparsed verdicts "
        "are excluded from every rate and mean, never counted as wrong."
    )
    if clustered:
        note += (
            " An item's several answers (turns, samples) are not independent: every interval is clustered by "
            "item (rates: Wilson at the effective number of answers, within [0, 1]; means: cluster-robust "
            "standard error)."
        )
    return note


def _category_table(s: RunSummary) -> list[str]:
    head, cell = modes.get(s.mode).category_column()
    out = [f"| category | items | judged | unparsed | {head} | exact match |", "|---|---|---|---|---|---|"]
    for cat, c in s.per_category.items():
        em = pct(c["exact_match"]["value"]) if s.exact_match_shown else "-"
        out.append(f"| {md_text(cat)} | {c['n_items']} | {c['n_judged']} | {c['n_unparsed']} | {cell(c)} | {em} |")
    return out


def _cell(text, width=80) -> str:
    """One line of text from outputs or datasets for a table cell: cut to `width`, never markup."""
    text = "" if text is None else str(text)
    text = " ".join(text.split())
    return md_text(text if len(text) <= width else text[: width - 1] + "…")


def skipped_markdown(s: RunSummary) -> list[str]:
    """The answers left out as too long for a context (dataset.on_too_long: skip), every one up to
    SKIPPED_SHOWN."""
    if not s.skipped_items:
        return []
    several = any(e["turn"] != 1 or e["sample"] != 0 for e in s.skipped_items)
    out = [
        "## Skipped items",
        "",
        f"{s.n_skipped} answer(s) were skipped, each for the reason below (too long for a model's context under "
        "dataset.on_too_long: skip, or no answer in the dataset's field of a generator's answers_from): "
        "they are left out of every count, rate and interval of this report.",
        "",
        "| id | turn, sample | why |" if several else "| id | why |",
        "|---|---|---|" if several else "|---|---|",
    ]
    for e in s.skipped_items[:SKIPPED_SHOWN]:
        where = [f"{e['turn']}, {e['sample']}"] if several else []
        out.append("| " + " | ".join([_cell(e["id"], 40), *where, _cell(e["reason"], 300)]) + " |")
    if s.n_skipped > SKIPPED_SHOWN:
        out.append(f"\n... and {s.n_skipped - SKIPPED_SHOWN} more: summary.json's skipped_items lists every one.")
    return [*out, ""]


def behind(model: dict) -> str:
    """`behind https://api.example.com/v1, model gpt-4.1-2025-04-14` for a model behind an endpoint."""
    ids = model.get("served_models") or []
    return f"behind {md_text(model['base_url'])}" + (f", served as {md_text(', '.join(ids))}" if ids else "")


def render_markdown(s: RunSummary, df: pd.DataFrame, n_examples: int = 3) -> str:
    out = _heading_markdown(s)
    out += ["## Headline", "", "| measure | value |", "|---|---|"]
    out += [f"| {md_text(k)} | {md_text(v)} |" for k, v in headline_rows(s)]
    mode = modes.get(s.mode)
    out += ["", intervals_note(s.n_answers != s.n_items) + mode.interval_note(), ""]
    out += [line.replace("### ", "## ", 1) for line in strengths_markdown(s.across_cells, s.failed_cells)]
    out += controlled.markdown(s.across_cells)
    out += turn_table(s.metrics.get("per_turn"), *modes.get(s.mode).category_column())
    out += sampling_stats.markdown(s.metrics.get("samples"))
    out += ["## By category", "", *_category_table(s), ""]
    out += mode.markdown_sections(s.metrics, df)
    out += _unparsed_markdown(s)
    out += _truncated_markdown(s)
    out += _unfinished_markdown(s)
    out += skipped_markdown(s)
    out += _examples_markdown(mode, df, n_examples)
    out += _throughput_markdown(s)
    return "\n".join(out)


def _heading_markdown(s: RunSummary) -> list[str]:
    """The title, the generator and the judge (where each ran), and the placement warnings."""
    j = s.judge
    out = [f"# Report: run {md_code(s.run)}", ""]
    where = (
        behind(j)
        if j.get("engine") == "openai"
        else f"quantization {md_text(j['quantization'])}, GPUs {md_text(j['cuda_visible_devices'] or 'none (CPU)')}"
        + (" leased, ran on the CPU: torch saw no CUDA device" if j.get("ran_on_cpu") else "")
    )
    gen = s.generator
    out += [
        f"- Generator: {md_code(gen['model'])}" + (f" ({behind(gen)})" if gen.get("engine") == "openai" else ""),
        f"- Judge: {md_code(j['model'])} (mode {md_text(j['mode'])}, verdict {md_text(j['verdict'])}, {where})",
        "",
    ]
    for w in s.placement_warnings:
        out += [f"> **Warning:** {md_line(w)}", ""]
    return out


def _unparsed_markdown(s: RunSummary) -> list[str]:
    if not s.unparsed_reasons:
        return []
    out = ["## Unparsed verdicts", "", "| reason | count | examples |", "|---|---|---|"]
    for r, k in s.unparsed_reasons.items():
        shown = "; ".join(f"{_cell(e['id'])}: {_cell(e['detail'], 60)}" for e in s.unparsed_examples.get(r, []))
        out.append(f"| {_cell(r, 200)} | {k} | {shown} |")
    out.append("")
    return out


def _truncated_markdown(s: RunSummary) -> list[str]:
    if not s.truncated_examples:
        return []
    out = [
        "## Truncated answers",
        "",
        f"{s.n_truncated} answer(s) ({pct(s.truncated_rate)}) reached generator.max_new_tokens "
        f"({s.generator.get('max_new_tokens')}) before they ended; the judge graded them as they are. "
        "The first of them:",
        "",
        "| id | the answer ends |",
        "|---|---|",
    ]
    for e in s.truncated_examples:
        where = e["id"] + "".join(f", {k} {e[k]}" for k in ("turn", "sample") if k in e)
        out.append(f"| {_cell(where, 30)} | {_cell(e['output_end'], 170)} |")
    out.append("")
    return out


def _unfinished_markdown(s: RunSummary) -> list[str]:
    if not s.n_reasoning_unfinished:
        return []
    return [
        "## Reasoning not finished",
        "",
        f"{s.n_reasoning_unfinished} answer(s) ({pct(s.reasoning_unfinished_rate)}) ended inside their reasoning "
        "trace (generator.reasoning): the trace never closed, so there is no answer. They were not judged; "
        + (
            f"they count as {s.reasoning_unfinished_counted_as} (report.unfinished_reasoning). "
            if s.reasoning_unfinished_counted_as
            else "they count among the unparsed, left out of the measures (report.unfinished_reasoning: leave_out). "
        )
        + " ".join(unfinished_advice(s.reasoning_unfinished_causes or {LIMIT: s.n_reasoning_unfinished}))
        + f" Reasoning traces held {s.n_reasoning_tokens} tokens in all.",
        "",
    ]


def _examples_markdown(mode, df: pd.DataFrame, n_examples: int) -> list[str]:
    """The first `n_examples` of each of the mode's groups of judgments."""
    out = ["## Examples", ""]
    for name, g in mode.example_groups(df):
        if not len(g):
            continue
        out += [
            f"### {md_line(name)}",
            "",
            "| id | question | reference | answer | judge said |",
            "|---|---|---|---|---|",
        ]
        for row in g.head(n_examples).itertuples():
            out.append(
                f"| {_cell(row.id, 20)} | {_cell(row.prompt, 50)} | {_cell(row.reference, 30)} | "
                f"{_cell(row.output, 50)} | {_cell(mode.judge_said(row), 60)} |"
            )
        out.append("")
    return out


def _throughput_markdown(s: RunSummary) -> list[str]:
    """Each generation shard's and the judge's seconds and where their answers came from."""
    j = s.judge
    out = [
        "## Throughput",
        "",
        "Set-up and load are paid once per job; when they dominate, use fewer, larger shards (genjudge shards).",
        "",
        "Answers of each shard: taken from an earlier run's records (from an earlier run), answered by an identical "
        "request of this run (shared: a repeated question, another job's record), or computed by the shard.",
        "",
        "Set-up is the tokenizer and the model's fingerprint (with the imports they need), before the weights load.",
        "",
        "| shard | answers | GPUs | host | set-up s | load s | generate s | tokens/s | from an earlier run "
        "| shared in this run | computed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in s.shards:
        out.append(
            f"| {md_text(m['shard'])} | {m['n_items']} | {md_text(m['cuda_visible_devices'] or 'CPU')} | "
            f"{md_text(m['hostname'])} | {m.get('setup_seconds', 0.0):.1f} | "
            f"{m['load_seconds']:.1f} | {m['generate_seconds']:.1f} | {m['tokens_per_second'] or '-'} | "
            f"{m['resumed_items']} | {m.get('shared_items', 0)} | {m['computed_items']} |"
        )
    out += [
        "",
        f"Judge: set-up {j.get('setup_seconds', 0.0)} s, load {j['load_seconds']} s, judging {j['judge_seconds']} s; verdicts from an earlier run "
        f"{j['resumed_items']}, shared with an identical request in this run {j.get('shared_items', 0)}, computed "
        f"{j['computed_items']}; "
        + (
            "no weights here (behind an endpoint)"
            if j.get("engine") == "openai"
            else f"parameters per device: {md_text(json.dumps(j['placement']))}"
        ),
        "",
    ]
    return out


def _measure(v) -> str:
    if not isinstance(v, dict):
        return str(v)
    if v.get("kind") == "mean":  # a mean score, not a rate
        if v.get("value") is None:
            return "n/a"
        ci = f" [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]" if v.get("ci95") else ""
        return f"{v['value']:.2f}{ci}"
    return rate_text(v)


# A leaderboard row's fields that are not the mode's measures.
ROW_FIELDS = (
    "generator",
    "dataset",
    "judge",
    "opponent",
    "mode",
    "n_items",
    "n_answers",
    "n_judged",
    "n_unparsed",
    "n_truncated",
    "truncated_rate",
    "exact_match",
    "exact_match_shown",
)


def leaderboard_markdown(rows: list[dict]) -> list[str]:
    measures = []
    for r in rows:
        for k in r:
            if k not in ROW_FIELDS and k not in measures:
                measures.append(k)
    pairwise = any(r["opponent"] for r in rows)
    several = any(r.get("n_answers", r["n_items"]) != r["n_items"] for r in rows)  # turns or samples
    head = [
        "generator",
        *(["vs"] if pairwise else []),
        "dataset",
        "judge",
        *measures,
        "items",
        *(["answers"] if several else []),
        "unparsed answers",
        "truncated answers",
        "exact match",
    ]
    body = []
    for r in rows:
        vs = r["opponent"] or ("baseline" if modes.get(r["mode"]).needs_baseline else "")
        cells = [
            r["generator"],
            *([vs] if pairwise else []),
            r["dataset"],
            r["judge"],
            *[_measure(r.get(m)) if r.get(m) is not None else "" for m in measures],
            str(r["n_items"]),
            *([str(r.get("n_answers", r["n_items"]))] if several else []),
            str(r["n_unparsed"]),
            truncated_text(r.get("n_truncated", 0), r.get("truncated_rate")),
            pct(r["exact_match"]["value"]) if r.get("exact_match_shown", True) else "-",
        ]
        body.append(cells)
    return markdown_table(head, body)


def strengths_markdown(across: dict, failed: list = ()) -> list[str]:
    """The Bradley-Terry tables of every judge and dataset; `failed`: the run's failed cells, whose games
    each table says it was fitted without."""
    out = []
    for judge, measures in across.items():
        for dataset, strengths in measures.get("bradley_terry", {}).items():
            out += [
                f"### Bradley-Terry strengths: {md_text(dataset)} (judge {md_text(judge)})",
                "",
            ]
            if gone := failed_pairs(failed, judge, dataset):
                out += [
                    f"> **Warning:** fitted without the games of the failed cell(s) {md_text(', '.join(gone))} "
                    "(see Failed cells): every strength here lacks them, and the table marks this column failed.",
                    "",
                ]
            out += [
                "| generator | strength | 95% interval |",
                "|---|---|---|",
            ]
            for g, v in sorted(strengths.items(), key=lambda kv: -kv[1]["strength"]):
                out.append(f"| {md_text(g)} | {v['strength']:+.2f} | [{v['ci95'][0]:+.2f}, {v['ci95'][1]:+.2f}] |")
            out += [
                "",
                "Log-scale strengths centred at 0 (P(a beats b) = 1 / (1 + exp(s_b - s_a))); ties count "
                "half; intervals from a seeded bootstrap over items.",
                "",
            ]
    return out


def render_experiment(run: RunSummary, cells: dict, n_examples: int) -> str:
    out = [
        f"# Report: run {md_code(run.run)}",
        "",
        f"{run.n_items} items (the datasets' questions) · {run.n_cells} cells (a generator's answers on a dataset "
        f"by a judge) · {run.n_answers} verdicts (answers judged over every cell: items × turns × samples) · "
        f"{run.n_unparsed} unparsed verdicts",
        "",
        "## Leaderboard",
        "",
        *leaderboard_markdown(run.leaderboard),
        "",
        intervals_note(any(r.get("n_answers", r["n_items"]) != r["n_items"] for r in run.leaderboard)),
        "",
    ]
    if run.n_skipped:
        out += [
            f"{run.n_skipped} answer(s) were skipped (too long for a model's context under dataset.on_too_long: skip, "
            "or no answer in a generator's answers_from field): "
            "left out of every count and measure, listed under each cell's 'Skipped items'.",
            "",
        ]
    out += strengths_markdown(run.across_cells, run.failed_cells)
    out += controlled.markdown(run.across_cells)
    out += paired.markdown(run.paired)
    for key, (s, df) in cells.items():
        body = render_markdown(s, df, n_examples).splitlines()
        out += [f"## {md_line(key)}", ""]
        # The cell's own report, one heading level down, without its title.
        out += ["#" + line if line.startswith("## ") or line.startswith("### ") else line for line in body[2:]]
    return "\n".join(out)


def time_model_markdown(check: dict) -> list[str]:
    """report.md's table of predicted against measured seconds per job (none without timings)."""
    from genjudge.planning.calibration import CHECK_NOTE, check_rows, fixed_costs_text, ratio_text

    if not check:
        return []
    fixed = fixed_costs_text(check)
    return [
        "## Time model: predicted against measured",
        "",
        CHECK_NOTE,
        "",
        *markdown_table(*check_rows(check)),
        "",
        ratio_text(check),
        "",
        *([f"> **Note:** {fixed}", ""] if fixed else []),
    ]
