"""Multi-turn conversations (MT-bench's `turns`): an item is a list of user turns, each with its
own optional reference answer.

The item table keeps a multi-turn item's turns in its `turns` column, a JSON string of
`[{"question": ..., "reference": ...}, ...]`; `prompt` and `reference` are turn 1's. A
single-turn item has `turns` null and is turn 1 of itself.

Generations, judge rows and judgments have one row per (id, turn), turn counted from 1.
Turn k is generated with turns 1..k-1 and the generator's own answers to them as chat
history, so a shard's turns run in order; each (item, turn) is its own item-cache record
(its key holds the whole conversation as sent), so a resumed job recomputes nothing done.

The judge's template for turn k sees the conversation up to turn k: `{question_1}`,
`{answer_1}`, `{ref_answer_1}`, ..., `{question_k}`, `{answer_k}`, `{ref_answer_k}` (pairwise:
`{answer_a_1}`, `{answer_b_1}`, ...), as FastChat's MT-bench judge prompts name them, beside
the mode's own placeholders, which hold turn k's values.
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd

TURN_KEYS = ["id", "turn"]  # with `sample` (genjudge.data.samples.ROW_KEY), what identifies a generation row

# question_2, answer_2, answer_a_2, answer_b_2, ref_answer_2
TURN_PLACEHOLDER = re.compile(r"^(question|answer|answer_a|answer_b|ref_answer)_([1-9][0-9]*)$")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def item_turns(prompt, reference, turns) -> list[dict]:
    """An item's turns as [{question, reference}]; a single-turn item is one turn."""
    if _missing(turns):
        return [{"question": prompt, "reference": None if _missing(reference) else reference}]
    return json.loads(turns)


def n_turns(items: pd.DataFrame) -> list[int]:
    if "turns" not in items:
        return [1] * len(items)
    return [1 if _missing(t) else len(json.loads(t)) for t in items["turns"]]


def expand_turns(items: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, turn): `prompt` and `reference` are that turn's; `turn` counts from 1."""
    rows = []
    cols = [c for c in items.columns if c != "turns"]
    turns = items["turns"] if "turns" in items else [None] * len(items)
    for rec, t in zip(items[cols].to_dict(orient="records"), turns):
        for k, turn in enumerate(item_turns(rec["prompt"], rec["reference"], t), start=1):
            rows.append({**rec, "turn": k, "prompt": turn["question"], "reference": turn["reference"]})
    out = pd.DataFrame(rows, columns=[*cols, "turn"])
    out.insert(1, "turn", out.pop("turn").astype("int64"))
    return out


def history_messages(questions: list[str], answers: list[str]) -> list[dict]:
    """The chat for the next turn: each earlier question and the generator's answer, then the
    next question (`questions` has one more entry than `answers`)."""
    messages = []
    for q, a in zip(questions, answers):
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": questions[len(answers)]})
    return messages


def with_history(gens: pd.DataFrame) -> pd.DataFrame:
    """`gens` (one generator's merged answers, all turns) with a `history` column: for each row,
    [{question, answer, reference}] of turns 1..k of its item (its own turn last); each sample
    (generator.n_samples) is a conversation of its own."""
    gens = gens.copy()
    if "turn" not in gens:
        gens["turn"] = 1
    samples = gens["sample"] if "sample" in gens else [0] * len(gens)
    convo: dict = {}
    for row, s in zip(gens.itertuples(), samples):
        convo.setdefault((row.id, s), {})[int(row.turn)] = {
            "question": row.prompt,
            "answer": row.output,
            "reference": None if _missing(row.reference) else row.reference,
        }
    gens["history"] = [
        [convo[(i, s)][j] for j in range(1, int(k) + 1) if j in convo[(i, s)]]
        for i, s, k in zip(gens["id"], samples, gens["turn"])
    ]
    return gens


def placeholders(history: list[dict] | None, opponent: dict | None = None, item_id=None) -> dict:
    """The turn placeholders of one judge request. Single-answer modes: question_j, answer_j,
    ref_answer_j. Pairwise (`opponent` maps (id, turn) to the other side's answer): answer_a_j
    and answer_b_j hold the candidate's and the opponent's; the caller swaps them per order."""
    values: dict = {}
    for j, t in enumerate(history or [], start=1):
        values[f"question_{j}"] = t["question"]
        values[f"ref_answer_{j}"] = t["reference"]
        if opponent is None:
            values[f"answer_{j}"] = t["answer"]
        else:
            values[f"answer_a_{j}"] = t["answer"]
            values[f"answer_b_{j}"] = opponent.get((item_id, j))
    return values


def swapped(values: dict) -> dict:
    """Pairwise placeholders with A and B exchanged (the second order)."""
    out = dict(values)
    for key, v in values.items():
        m = TURN_PLACEHOLDER.match(key)
        if m and m.group(1) in ("answer_a", "answer_b"):
            other = "answer_b" if m.group(1) == "answer_a" else "answer_a"
            out[f"{other}_{m.group(2)}"] = v
    return out


def allowed_placeholder(name: str, mode_placeholders) -> bool:
    """Whether a template may use `name` in a mode with `mode_placeholders` (besides those)."""
    if name == "turn":
        return True
    if name == "answer":  # FastChat's name for the answer graded
        return "candidate" in mode_placeholders
    m = TURN_PLACEHOLDER.match(name)
    if not m:
        return False
    kind = m.group(1)
    if kind == "answer":
        return "candidate" in mode_placeholders
    if kind in ("answer_a", "answer_b"):
        return "answer_a" in mode_placeholders
    return True


def reference_turns(template_text: str) -> set[int]:
    """The turns whose reference a template shows through `{ref_answer_j}`."""
    import string

    out = set()
    for _, name, _, _ in string.Formatter().parse(template_text):
        m = TURN_PLACEHOLDER.match(name or "")
        if m and m.group(1) == "ref_answer":
            out.add(int(m.group(2)))
    return out


def any_reference(items: pd.DataFrame) -> bool:
    """Whether any item (any turn) has a reference answer."""
    if items["reference"].map(lambda r: not _missing(r)).any():
        return True
    if "turns" in items:
        for t in items["turns"]:
            if not _missing(t) and any(not _missing(x.get("reference")) for x in json.loads(t)):
                return True
    return False
