"""The headline of a run as (measure, value) text rows: counts, the mode's measures, agreement with human
labels, exact match. `genjudge summary`, report.md and report.html all show these rows."""

from __future__ import annotations

from genjudge.judging import modes
from genjudge.judging.modes.base import pct, rate_text


def kappa_text(entry: dict, key: str) -> str:
    """A kappa of `entry` as the report says it: the value, or "not defined (why)"."""
    x = entry.get(key)
    if x is not None:
        return f"{x:.2f}"
    why = entry.get(f"{key}_undefined")
    return f"not defined ({why})" if why else "n/a"


def corr_text(c: dict | None, key: str) -> str:
    """A correlation of `c`: the value, or "not defined (why)" (a constant side, too few pairs)."""
    if c and c.get(key) is None and c.get("undefined"):
        return f"not defined ({c['undefined']})"
    return "n/a" if not c or c.get(key) is None else f"{c[key]:+.2f}"


def labelled_text(h: dict) -> str:
    """`30 of 120 answers (25.0%) of generator mistral`: the labelled share of the answers the labels name
    (labels of rubric criteria: `30 criteria of 12 items`)."""
    if h.get("kind") == "criterion":
        return f"{h['n_labelled']} criteria of {h['n_items']} items"
    n = h.get("n_answers", h["n_items"])
    of = "; ".join(f"{k} {', '.join(v)}" for k, v in (h.get("covers") or {}).items())
    return f"{h['n_labelled']} of {n} answers ({pct(h['n_labelled'] / n) if n else 'n/a'})" + (
        f" of {of}" if of else ""
    )


def validity_rows(v: dict) -> list[tuple[str, str]]:
    """Each judge's and panel's agreement with the human labels (`validity` of summary.json)."""
    rows = []
    for kind, entries in (("judge", v.get("judges", {})), ("panel", v.get("panels", {}))):
        for name, e in entries.items():
            h = e.get("human")
            if not h:
                continue
            value = f"{rate_text(h['agreement'])} over {h['n_judged']} labelled answers ({labelled_text(h)})"
            if h.get("balanced_f1") and h["balanced_f1"].get("value") is not None:
                value = f"balanced F1 {h['balanced_f1']['value']:.2f}, agreement " + value
            if h.get("cohen_kappa") is not None or h["kind"] != "score":
                value += f", Cohen's kappa {kappa_text(h, 'cohen_kappa')}"
            if h.get("correlation"):
                value += f", Spearman {corr_text(h['correlation'], 'spearman')}"
            if h["n_unparsed"]:
                value += f" ({h['n_unparsed']} labelled answers unparsed, not counted)"
            if h.get("labels_on_differing_answers"):
                d = h["labels_on_differing_answers"]
                value += f" (warning: {d['n_labels']} labels each applied to answers that differ)"
            rows.append((f"agreement with human labels ({kind} {name})", value))
    return rows


def differing_text(kind: str, name: str, h: dict) -> str:
    """The warning for labels each applied to answers that differ."""
    d = h["labels_on_differing_answers"]
    text = (
        f"{kind} {name}: {d['n_labels']} labels of {h['labels']} were each applied to answers that differ "
        f"({d['n_answers']} answers, of generator{'s' if len(d['generators']) > 1 else ''} "
        f"{', '.join(d['generators'])}); the agreement counts every one of them."
    )
    if len(d["generators"]) > 1:
        text += (
            " A label that names no generator is applied to every generator's answer: if the labels are about one "
            "generator's answers, map its field (labels.fields.generator)."
        )
    return text


def items_text(s) -> str:
    """`12`, or `12 (36 answers: 3 samples per item)` where items have several answers."""
    if s.n_answers and s.n_answers != s.n_items:
        return f"{s.n_items} ({s.n_answers} answers: {s.answers_per_item or 'several per item'})"
    return str(s.n_items)


SKIPPED_ROW = "skipped (too long for a model's context)"


def skipped_text(n: int) -> str:
    return f"{n} answer(s), left out of every count and measure (listed under 'Skipped items')"


def truncated_text(n: int, share: float | None) -> str:
    return f"{n} ({pct(share)})"


def headline_rows(s) -> list[tuple[str, str]]:
    """(measure, value) rows of a RunSummary: counts, the mode's measures, exact match."""
    flat = s.to_dict()
    return [
        ("items", items_text(s)),
        ("judged (parsed verdicts)", str(s.n_judged)),
        ("unparsed", f"{s.n_unparsed} ({pct(s.unparsed_rate)})"),
        ("truncated answers (reached generator.max_new_tokens)", truncated_text(s.n_truncated, s.truncated_rate)),
        *(
            [
                (
                    "reasoning not finished (trace never closed: no answer, not judged)",
                    truncated_text(s.n_reasoning_unfinished, s.reasoning_unfinished_rate)
                    + (
                        f"; counted as {s.reasoning_unfinished_counted_as} (report.unfinished_reasoning)"
                        if s.reasoning_unfinished_counted_as
                        else "; left out of the measures (report.unfinished_reasoning: leave_out)"
                    ),
                )
            ]
            if s.n_reasoning_unfinished
            else []
        ),
        *([(SKIPPED_ROW, skipped_text(s.n_skipped))] if s.n_skipped else []),
        *modes.get(s.mode).headline(flat),
        *validity_rows(s.validity),
        (
            "normalised exact match",
            (
                rate_text(s.exact_match)
                + (
                    f" ({s.answers_not_extracted} answers with nothing extracted, counted as no match)"
                    if s.answers_not_extracted
                    else ""
                )
                + (
                    " (read by a fallback, never decided by rule: "
                    + ", ".join(f"{k} {v}" for k, v in s.exact_match_fallbacks.items())
                    + ")"
                    if s.exact_match_fallbacks
                    else ""
                )
            )
            if s.exact_match_shown
            else f"not shown: {s.exact_match_note}",
        ),
    ]


def value_text(v: dict, kind: str) -> str:
    if v["status"] != "ok":
        return {"not graded": "–"}.get(v["status"], v["status"])
    if v["value"] is None:
        return "n/a"
    if kind == "rate":
        if "wins" in v:  # a pairwise win rate (ties half): the outcomes beside it, never instead of it
            return f"{rate_text(v)} (W/T/L {v['wins']}/{v['ties']}/{v['losses']})"
        return rate_text(v)
    fmt = "{:+.2f}" if kind == "strength" else "{:.2f}"
    ci = f" [{fmt.format(v['ci95'][0])}, {fmt.format(v['ci95'][1])}]" if v.get("ci95") else ""
    return fmt.format(v["value"]) + ci
