"""Human labels of a judge's items (`judge.labels`): read, checked against the run, joined.

A labels file is JSONL, CSV or Parquet, read like the dataset (errors name the file and the
line or row), with a field mapping: `id`, `label`, and optionally `generator`, `dataset`,
`opponent` and `turn` when labels differ per generator, dataset, pair or turn of a conversation. What a label is depends on the
judge's mode:

- a verdict (modes with labels, e.g. reference: `correct`/`incorrect`, as written by the mode
  or by its judge: `CORRECT`; true/false for correct/incorrect);
- a score (modes without labels, e.g. score): a number;
- a winner (pairwise): `win`/`tie`/`loss` from the generator's side, or the name of the winning
  generator (the row's generator or its opponent), or `tie`.

A label whose item is not in the run is an error naming it; an item without a label is simply
not part of the agreement.
"""

from __future__ import annotations

import pandas as pd

from genjudge.errors import InputError

KEYS = ("generator", "dataset", "opponent", "turn")
CRITERION = ("criterion", "labeller")  # a rubric's labels: which criterion, and who labelled it


def kind(mode) -> str:
    """What a human label of this mode is: "winner", "verdict", "score" or "criterion" (met or not, of one
    criterion of an item's rubric: judging/criteria_labels.py)."""
    if getattr(mode, "per_item_criteria", False):
        return "criterion"
    if mode.needs_baseline:
        return "winner"
    return "verdict" if mode.labels else "score"


def _verdicts(mode) -> dict:
    out = {str(v).upper(): v for v in mode.labels.values()}
    out.update({str(k).upper(): v for k, v in mode.labels.items()})
    if "correct" in out.values() and "incorrect" in out.values():
        out.update({"TRUE": "correct", "FALSE": "incorrect", "1": "correct", "0": "incorrect"})
    return out


def _normalise(value, mode, where: str):
    from genjudge.data.dataset import _as_text

    if value is None or (isinstance(value, float) and pd.isna(value)) or str(value).strip() == "":
        raise InputError(f"{where}: the label is empty")
    k = kind(mode)
    text = _as_text(value).strip()
    if k == "criterion":
        from genjudge.judging.criteria_labels import criterion_label

        return criterion_label(value, where)
    if k == "score":
        try:
            return float(text)
        except ValueError:
            raise InputError(f"{where}: label {text!r} is not a number (mode {mode.name} labels are scores)") from None
    if k == "verdict":
        verdicts = _verdicts(mode)
        if text.upper() not in verdicts:
            raise InputError(
                f"{where}: label {text!r} is not one of {sorted(set(verdicts.values()))} (mode {mode.name})"
            )
        return verdicts[text.upper()]
    return text  # a winner: resolved against each row's generator and opponent when joined


def read_labels(section: dict, mode) -> pd.DataFrame:
    """The labels file of a judge's `labels` section as a frame: id, label and the key fields in use."""
    from genjudge.data.dataset import _MISSING, _as_text, _lookup, read_rows

    path, fields = section["path"], section["fields"]
    source, rows = read_rows(path, section["format"])
    if not rows:
        raise InputError(f"{source}: the labels file is empty")
    used = {
        "id": fields["id"],
        "label": fields["label"],
        **{k: fields[k] for k in (*KEYS, *CRITERION) if fields.get(k)},
    }
    if kind(mode) == "criterion" and "criterion" not in used:
        raise InputError(
            f"labels.fields.criterion: not set; mode {mode.name} labels one criterion of an item's rubric each: "
            f"name the field that holds its index (from 0) or its text"
        )
    out = []
    for pos, obj in rows:
        where = f"{source}, {pos}"
        rec = {}
        for key, name in used.items():
            value = _lookup(obj, name)
            if value is _MISSING or value is None:
                raise InputError(f"{where}: missing field {name!r} (labels.fields.{key})")
            rec[key] = _as_text(value) if key != "label" else value
        if "turn" in rec:
            try:
                rec["turn"] = int(rec["turn"])
            except ValueError:
                raise InputError(f"{where}: field {fields['turn']!r}: turn {rec['turn']!r} is not a number") from None
            if rec["turn"] < 1:
                raise InputError(f"{where}: field {fields['turn']!r}: turns count from 1 (is {rec['turn']})")
        rec["label"] = _normalise(rec["label"], mode, f"{where}, field {fields['label']!r}")
        rec["where"] = where
        out.append(rec)
    df = pd.DataFrame(out)
    keys = [k for k in (*KEYS, *CRITERION, "id") if k in df]
    dup = df[df.duplicated(keys, keep=False)]
    if len(dup):
        raise InputError(
            f"{source}: {len(dup)} rows label the same item twice, e.g. {dup['where'].head(2).tolist()} "
            f"({', '.join(keys)} = {dup.iloc[0][keys].tolist()})"
        )
    return df


def check_ids(labels: pd.DataFrame, ids_by_dataset: dict, generators, source: str, where: str, mode=None) -> None:
    """Every label names an item (and generator, dataset) of the run, and a pairwise label a winner
    the run knows; raises InputError naming the others."""
    if mode is not None and kind(mode) == "winner":
        known = {"win", "tie", "loss"} | set(generators)
        bad = labels[[str(x).lower() not in known and x not in known for x in labels["label"]]]
        if len(bad):
            r = bad.iloc[0]
            raise InputError(
                f"{where}: {r['where']}: winner {r['label']!r} is neither win, tie or loss nor a generator of the "
                f"run {sorted(generators)} (mode {mode.name} labels name the winner of a pair)"
            )
    for key, known in (("generator", set(generators)), ("opponent", set(generators)), ("dataset", set(ids_by_dataset))):
        if key in labels:
            bad = sorted(set(labels[key]) - known)
            if bad:
                raise InputError(f"{where}: {source} names {key}(s) {bad} not in the run (known: {sorted(known)})")
    if "dataset" in labels:
        unknown = [i for d, i in zip(labels["dataset"], labels["id"]) if i not in ids_by_dataset[d]]
    else:
        every = set().union(*ids_by_dataset.values())
        unknown = [i for i in labels["id"] if i not in every]
    if unknown:
        shown = ", ".join(map(repr, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
        raise InputError(
            f"{where}: {source} labels {len(unknown)} id(s) not in the dataset"
            f"{'s' if len(ids_by_dataset) > 1 else ''} {', '.join(sorted(ids_by_dataset))}: {shown}"
        )


def winner_outcome(label: str, generator: str, opponent: str | None, where: str) -> str:
    """A pairwise label as the generator's outcome: win, tie or loss."""
    low = label.lower()
    if low in ("win", "tie", "loss"):
        return low
    if label == generator:
        return "win"
    if opponent is not None and label == opponent:
        return "loss"
    raise InputError(
        f"{where}: winner {label!r} is neither win/tie/loss nor the generator {generator!r} "
        f"or its opponent {opponent!r}"
    )


def join(judgments: pd.DataFrame, labels: pd.DataFrame, mode, source: str, where: str) -> pd.DataFrame:
    """The judged rows that carry a label, with a `human` column (each label's meaning resolved).
    A label that matches no judged row is an error naming it."""
    df = judgments.copy() if "turn" in judgments else judgments.assign(turn=1)
    if "turn" not in labels and df["turn"].nunique() > 1:
        raise InputError(
            f"{where}: the judge grades {df['turn'].nunique()} turns per conversation and {source} does not say "
            "which turn a label is for: map its turn field (labels.fields.turn)"
        )
    df["opponent"] = df["opponent"].astype(object).where(df["opponent"].notna(), None)
    keys = ["id", *[k for k in KEYS if k in labels]]
    if "opponent" in keys:
        labels = labels.assign(opponent=labels["opponent"].replace("", None))
    merged = df.merge(labels.drop(columns=["where"]), on=keys, how="left", indicator=False)
    matched = labels.merge(df[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    stray = matched[matched["_merge"] == "left_only"]
    if len(stray):
        shown = ", ".join(
            f"{r.where} ({', '.join(f'{k}={getattr(r, k)}' for k in keys)})" for r in stray.head(5).itertuples()
        )
        raise InputError(f"{where}: {len(stray)} label(s) of {source} match no judged item: {shown}")
    merged = merged[merged["label"].notna()].copy()
    if kind(mode) == "winner":
        merged["human"] = [
            winner_outcome(str(lab), g, o, where)
            for lab, g, o in zip(merged["label"], merged["generator"], merged["opponent"])
        ]
    else:
        merged["human"] = merged["label"]
    return merged.drop(columns=["label"])


def differing_answers(joined: pd.DataFrame, labels: pd.DataFrame) -> dict | None:
    """Labels each applied to answers that differ (a label naming no generator applied to every
    generator's answer, or to every sample): {n_labels, n_answers, generators}, None where there are none."""
    keys = ["id", *[k for k in KEYS if k in labels]]
    if "dataset" in joined and "dataset" not in keys:
        keys.append("dataset")  # the same id in two datasets is two items, and two labels
    shown = [c for c in ("output", "opponent_output") if c in joined]
    if not shown:
        return None
    answer = joined[shown].astype(str).apply(lambda r: " ".join(" ".join(r).split()), axis=1)
    n_answers = answer.groupby([joined[k] for k in keys], dropna=False).transform("nunique")
    hit = joined[n_answers > 1]
    if hit.empty:
        return None
    return {
        "n_labels": int(len(hit[keys].drop_duplicates())),
        "n_answers": len(hit),
        "generators": sorted(map(str, hit["generator"].unique())),
    }


def check_config_labels(exp, ids_by_dataset: dict, named_judges: bool) -> None:
    """While planning: every judge's labels file reads, and names only items of the run.
    `named_judges`: the config names its judges (`judges.<name>.labels`, else `judge.labels`)."""
    from genjudge.judging import modes

    for name, section in exp.judges.items():
        lab = section.get("labels") or {}
        if lab.get("path"):
            where = f"judges.{name}.labels" if named_judges else "judge.labels"
            labels = read_labels(lab, modes.get(section["mode"]))
            check_ids(labels, ids_by_dataset, exp.generators, str(lab["path"]), where, modes.get(section["mode"]))
