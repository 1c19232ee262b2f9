"""The report's "Can I trust the judge?" section: agreement with human labels, bias diagnostics,
self-preference warnings and panels of judges, all from the stored judgments (no model loaded)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from genjudge.judging import agreement, bias, modes
from genjudge.judging import labels as human
from genjudge.judging.headline import corr_text, differing_text, kappa_text, labelled_text
from genjudge.judging.items import count_items
from genjudge.judging.modes.base import rate_text
from genjudge.judging.panels import panel_judgments, panel_summary, resolve_panels
from genjudge.judging.tables import md_line, md_text
from genjudge.stages import corrected


def _ids_by_dataset(df: pd.DataFrame) -> dict:
    return {str(d): set(g["id"]) for d, g in df.groupby("dataset")}


def label_agreement(df: pd.DataFrame, section: dict, mode, where: str) -> dict:
    """Agreement of a judge's (or panel's) verdicts with the human labels of `section`, over the
    labelled items; labelled items left unparsed are counted apart, never as disagreement."""
    labels = human.read_labels(section, mode)
    source = str(section["path"])
    generators = set(df["generator"]) | set(df["opponent"].dropna())
    human.check_ids(labels, _ids_by_dataset(df), generators, source, where, mode)
    if human.kind(mode) == "criterion":  # criteria met or not, per (item, answer, criterion)
        from genjudge.judging.criteria_labels import criterion_agreement

        return {"labels": source, **criterion_agreement(df, labels, source, where)}
    joined = human.join(df, labels, mode, source, where)
    parsed = joined[joined["verdict"].notna()]
    k = human.kind(mode)
    differing = human.differing_answers(joined, labels)
    # What the labels could cover: the answers of the generators, datasets and opponents they name (every
    # answer where they name none), so that 30 labels of one generator's 120 answers read 30 of 120.
    scope = df
    for key in ("generator", "dataset", "opponent"):
        if key in labels and key in df and labels[key].notna().any():
            scope = scope[scope[key].isin(set(labels[key].dropna()))]
    out = {
        "labels": source,
        "kind": k,
        "n_items": count_items(scope),
        "n_answers": len(scope),  # answers of what the labels name: the share labelled is of these
        "covers": {
            key: sorted(map(str, set(labels[key].dropna())))
            for key in ("generator", "dataset")
            if key in labels and labels[key].notna().any()
        },
        "n_labelled": len(joined),
        "n_judged": len(parsed),
        "n_unparsed": len(joined) - len(parsed),
    }
    if differing:
        out["labels_on_differing_answers"] = differing
    if k == "score":
        scores = pd.to_numeric(parsed["verdict"], errors="coerce")
        out.update(agreement.agreement(list(parsed["human"].astype(float)), list(scores), kappa=False))
        out["correlation"] = agreement.correlations(
            scores, parsed["human"].astype(float), ("the scores", "the human labels")
        )
        out["confusion"] = agreement.confusion([f"{x:g}" for x in parsed["human"]], [f"{x:g}" for x in scores])
    else:
        out.update(agreement.agreement(list(parsed["human"]), list(parsed["verdict"])))
    return out


def with_baseline_answers(df: pd.DataFrame, judge: dict) -> pd.DataFrame:
    """Pairwise against an outside baseline file: its answers for the length diagnostics, each row
    meeting the answer its judge request met (the same turn; sample s the baseline's sample s, or its
    only one; None where the baseline's trace never closed)."""
    from genjudge.data.samples import SampleView
    from genjudge.judging.modes.pairwise import answers_by_turn

    base = judge.get("baseline")
    if "opponent_output" in df or not base or not Path(base).is_file():
        return df
    answers = answers_by_turn(base)
    turns = df["turn"].astype(int) if "turn" in df else [1] * len(df)
    samples = df["sample"].astype(int) if "sample" in df else [0] * len(df)
    theirs = [SampleView(answers, s).get((i, t)) for i, t, s in zip(df["id"], turns, samples)]
    return df.assign(opponent_output=theirs)


def summarise_validity(exp, judgments: dict, *, panels: dict, labels_keys: dict) -> dict:
    """`panels`: the config's `panels` section (the report's: those whose judges survived);
    `labels_keys`: judge -> the config key of its labels as written (config.experiment.entry_keys), for errors."""
    out: dict = {
        "length_measure": bias.LENGTH_MEASURE,
        "self_preference": bias.self_preference(exp.generators, exp.judges),
        "judges": {},
        "panels": {},
    }
    for judge, df in judgments.items():
        section = exp.judges[judge]
        mode = modes.get(section["mode"])
        if mode.needs_baseline:
            df = with_baseline_answers(df, section)
        entry = {"mode": mode.name, "bias": bias.diagnostics(df, mode)}
        lab = section.get("labels") or {}
        if lab.get("path"):
            entry["human"] = label_agreement(df, lab, mode, labels_keys[judge])
            if human.kind(mode) != "criterion":  # labels of criteria correct no answer's score
                entry["corrected"] = corrected.corrected_figures(df, lab, mode, labels_keys[judge])
        out["judges"][judge] = entry
    for name, panel in resolve_panels(panels, exp).items():
        pdf = panel_judgments(panel, judgments)
        s = panel_summary(panel, pdf)
        sections = [exp.judges[j].get("labels") or {} for j in panel["judges"]]
        if sections[0].get("path") and all(x == sections[0] for x in sections):
            s["human"] = label_agreement(pdf, sections[0], modes.get(panel["mode"]), f"panels.{name}")
        out["panels"][name] = s
    return out


def _confusion(c: dict) -> list[str]:
    verdicts, humans, counts = agreement.confusion_rows(c)
    out = ["| judge \\ human | " + " | ".join(map(md_text, humans)) + " |", "|---|" + "---|" * len(humans)]
    out += [f"| {md_text(v)} | " + " | ".join(map(str, row)) + " |" for v, row in zip(verdicts, counts)]
    return out


def criteria_markdown(rows: list) -> list[str]:
    """The judge against people's labels of rubric criteria (HealthBench's meta-evaluation)."""
    if not rows:
        return []
    out = [
        "### The judge on labelled criteria",
        "",
        "| | labelled criteria | judged | unparsed (not counted) | balanced F1 | agreement | Cohen's kappa | "
        "labellers with each other (balanced F1) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, n, h in rows:
        f1 = h["balanced_f1"]
        ci = f" [{f1['ci95'][0]:.2f}, {f1['ci95'][1]:.2f}]" if f1.get("ci95") else ""
        value = "n/a" if f1["value"] is None else f"{f1['value']:.2f}{ci}"
        ceiling = h.get("labellers")
        people = f"{ceiling['balanced_f1']:.2f} over {ceiling['n_pairs']} pairs" if ceiling else "-"
        out.append(
            f"| {k} {md_text(n)} | {h['n_labelled']} ({h['n_items']} items) | {h['n_judged']} | {h['n_unparsed']} | "
            f"{value} | {rate_text(h['agreement'])} | {kappa_text(h, 'cohen_kappa')} | {people} |"
        )
    out += [
        "",
        "Each label says whether an answer meets one criterion of its item's rubric. Balanced F1: the mean of the "
        "F1 of met and of not met, as HealthBench's meta-evaluation scores its grader, with a 95% percentile "
        "bootstrap interval over items; agreement has a 95% Wilson interval. Where several people labelled one "
        "criterion, their balanced F1 with each other is the ceiling to read the judge's against.",
        "",
    ]
    for k, n, h in rows:
        out += [
            f"Confusion matrix, {k} {md_text(n)} (rows: the judge, columns: the labels; True: met):",
            "",
            *_confusion(h["confusion"]),
            "",
        ]
    return out


def render(v: dict) -> list[str]:
    """Markdown lines of the section."""
    out = ["## Can I trust the judge?", ""]
    for w in v.get("self_preference", []):
        out += [f"> **Self-preference warning:** {md_line(w)}.", ""]
    labelled = [
        (k, n, e["human"])
        for k, es in (("judge", v["judges"]), ("panel", v["panels"]))
        for n, e in es.items()
        if e.get("human")
    ]
    criteria = [(k, n, h) for k, n, h in labelled if h.get("kind") == "criterion"]
    labelled = [(k, n, h) for k, n, h in labelled if h.get("kind") != "criterion"]
    out += criteria_markdown(criteria)
    out += _agreement_markdown(v, labelled)
    out += _bias_markdown(v)
    out += _panels_markdown(v)
    return out


def _agreement_markdown(v: dict, labelled: list) -> list[str]:
    """The judges and panels against human labels: (kind, name, agreement) each."""
    if not labelled:
        return []
    out = [
        "### Agreement with human labels",
        "",
        "| | labelled answers | judged | unparsed (not counted) | agreement | Cohen's kappa | Spearman | Pearson |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, n, h in labelled:
        c = h.get("correlation")
        out.append(
            f"| {k} {md_text(n)} | {labelled_text(h)} | "
            f"{h['n_judged']} | {h['n_unparsed']} | {rate_text(h['agreement'])} | "
            f"{kappa_text(h, 'cohen_kappa') if 'cohen_kappa' in h else '-'} | "
            f"{corr_text(c, 'spearman') if c else '-'} | {corr_text(c, 'pearson') if c else '-'} |"
        )
    out += [
        "",
        "Over the items with a label; labelled items whose verdict was unparsed (for a panel: no judge parsed, "
        "or no majority) are counted apart, never as disagreement. Agreement has a 95% Wilson interval.",
        "",
    ]
    for k, n, h in labelled:
        if h.get("labels_on_differing_answers"):
            out += [f"> **Warning:** {md_line(differing_text(k, n, h))}", ""]
    out += corrected.markdown({n: e["corrected"] for n, e in v["judges"].items() if e.get("corrected")})
    for k, n, h in labelled:
        if not h["confusion"]:
            continue
        out += [
            f"Confusion matrix, {k} {md_text(n)} (rows: the judge's verdicts, columns: human labels):",
            "",
            *_confusion(h["confusion"]),
            "",
        ]
    return out


def _bias_markdown(v: dict) -> list[str]:
    """Position and length bias of each judge that has diagnostics."""
    bias_rows = [(n, e["bias"]) for n, e in v["judges"].items() if e["bias"]]
    if not bias_rows:
        return []
    out = ["### Bias diagnostics", ""]
    pw = [(n, b) for n, b in bias_rows if "flip_rate" in b]
    single = [(n, b) for n, b in bias_rows if "length_correlation" in b]
    if pw:
        out += [
            "| judge | flip rate when swapped | first position wins | P(prefer longer) |",
            "|---|---|---|---|",
        ]
        out += [
            f"| {md_text(n)} | {rate_text(b['flip_rate'])} | {rate_text(b['first_position_win_rate'])} | "
            f"{rate_text(b['prefer_longer']) if 'prefer_longer' in b else 'n/a'} |"
            for n, b in pw
        ]
        out += [
            "",
            "Flip rate: pairs whose outcome changes when the answers swap places. First position: over every "
            "single judgment that named a winner, the share won by the answer shown first (50% is none). "
            "P(prefer longer): over decided pairs of answers of different lengths.",
            "",
        ]
    if single:
        out += ["| judge | Pearson (verdict, length) | Spearman | n |", "|---|---|---|---|"]
        out += [
            f"| {md_text(n)} | {corr_text(b['length_correlation'], 'pearson')} | {corr_text(b['length_correlation'], 'spearman')} "
            f"| {b['length_correlation']['n']} |"
            for n, b in single
        ]
        out += ["", "Verdicts as numbers: scores as given; correct 1, partial 0.5, incorrect 0.", ""]
    out += [f"Length: {v['length_measure']}.", ""]
    return out


def _panels_markdown(v: dict) -> list[str]:
    """Each panel's measures, its votes and how far its judges agree with each other."""
    if not v["panels"]:
        return []
    out = ["### Panels of judges", ""]
    for name, p in v["panels"].items():
        ij = p["inter_judge"]
        measures = ", ".join(
            f"{md_text(k)} {rate_text(m) if m.get('kind') != 'mean' else _mean(m)}" for k, m in p["measures"].items()
        )
        per_item = ", ".join(f"{k} judges: {c}" for k, c in p["parsed_votes_per_item"].items())
        out += [
            f"**{md_text(name)}** ({md_text(p['rule'])} of {md_text(', '.join(p['judges']))}; "
            f"mode {md_text(p['mode'])}): {measures or 'n/a'}.",
            "",
            f"- items: {p['n_items']}; decided: {p['n_decided']}; no majority: {p['no_majority']}"
            + f" (counted as {md_text(p['no_majority_is'])})"
            + f"; no judge parsed: {p['none_parsed']}",
            f"- judges parsed per item: {per_item}",
            f"- Fleiss' kappa {kappa_text(ij, 'fleiss_kappa')} over the {ij['n_all_parsed']} items every judge parsed; "
            "Cohen's kappa "
            + ", ".join(
                f"{md_text(pair)} {kappa_text(x, 'cohen_kappa')} (n {x['n']})" for pair, x in ij["pairs"].items()
            ),
            "",
        ]
    out += ["An unparsed vote is never a vote; a panel's majority is a strict majority of the parsed votes.", ""]
    return out


def _mean(m: dict) -> str:
    return "n/a" if m.get("value") is None else f"{m['value']:.2f}"


def with_validity(text: str, v: dict) -> str:
    """The report with the section after its headline (or leaderboard and strengths), before the details."""
    if not v:
        return text
    lines = text.splitlines()
    first = (
        "## Leaderboard",
        "## Headline",
        "## Bradley-Terry strengths",
        "## Length- and style",
        "## Paired differences",
    )
    heads = [i for i, line in enumerate(lines) if line.startswith("## ") and not line.startswith(first)]
    at = heads[0] if heads else len(lines)
    return "\n".join([*lines[:at], *render(v), *lines[at:]])
