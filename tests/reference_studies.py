"""Studies made up for the reference computation (tests/reference.py): hypothesis draws the raw
judgments tables (ties, single items, cells with every verdict unparsed, a generator alone in a
column, several samples and turns per item, missing references and categories, skipped answers,
human labels, panels); `check_study` writes them as parquet files, computes the report stage's
summary from them (no model, no Snakemake) and compares every figure the reference covers."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from reference import compare, expected, judge_cells, normalise

from genjudge import config as wfconfig
from genjudge.judging.reasoning import REASONING_UNFINISHED
from genjudge.stages.report import read_judgments, summary_of
from genjudge.store.records import GenerateMeta, JudgeMeta

VERDICTS = {
    "reference": ["correct", "incorrect", "partial", None],
    "score": ["1", "2.5", "7", "10", None],
    "pairwise": ["win", "tie", "loss", None],
}
OUTPUTS = ["A", "a", "the cat", "Cat", "4", "four", "", "The answer is B", "a an the", "x^2", "x_2", "(1,2)"]
# How an answer was found (extraction.STRICT and the fallbacks), as the parse stage writes it.
HOWS = ["whole text", "\\boxed{}", "the answer is X", "last number in the text", "the one marked letter"]
REFERENCES = ["A", "cat", "4", "a long reference answer of many more words than five", None]
CATEGORIES = ["x", "$z$", None]
# Each dataset's answer extraction (`dataset.answer`): none, one rule for all, or rules by category.
ANSWERS = [
    {},
    {},
    {"reference": "gsm8k", "candidate": "last_number"},
    {"by_category": [{"categories": ["x"], "candidate": "choice"}]},
    {"by_category": [{"categories": ["$z$"]}]},  # whole texts for $z$ too: nothing extracts
]


@st.composite
def studies(draw):
    """A study: its config sections and, per judge, the judgments table the parse stage writes."""
    n_gen = draw(st.sampled_from([1, 2, 2, 3]))
    gens = [f"g{i}" for i in range(n_gen)]
    datasets = {f"d{i}": {} for i in range(draw(st.sampled_from([1, 1, 1, 2])))}
    conversations = draw(st.sampled_from([False, False, True]))  # some items of two turns
    items = {
        d: [
            {
                "id": f"q{i}",
                "category": draw(st.sampled_from(CATEGORIES)),
                "reference": draw(st.sampled_from(REFERENCES)),
                "turns": draw(st.sampled_from([1, 2])) if conversations else 1,
            }
            for i in range(draw(st.integers(1, 4)))
        ]
        for d in datasets
    }
    samples = draw(st.sampled_from([1, 1, 1, 2, 3]))
    judges = {}
    for j in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3]))):
        mode = draw(st.sampled_from(["reference", "score", "pairwise"] if n_gen > 1 else ["reference", "score"]))
        judge = {"mode": mode, "pairs": "baseline", "baseline": None, "score_range": [1, 10]}
        if draw(st.booleans()):  # some judges grade some generators only (alone in a column, too)
            judge["generators"] = sorted(draw(st.sets(st.sampled_from(gens), min_size=1)))
        if len(datasets) > 1 and draw(st.booleans()):
            judge["datasets"] = [draw(st.sampled_from(sorted(datasets)))]
        if mode == "pairwise":
            if draw(st.booleans()):
                judge["pairs"] = "all"
                judge.setdefault("generators", gens)
                if len(judge["generators"]) < 2:
                    judge["generators"] = gens
            else:
                judge["baseline"] = draw(st.sampled_from(gens))
                if [g for g in judge.get("generators", gens) if g != judge["baseline"]] == []:
                    judge.pop("generators")
        judges[f"j{j}"] = judge
    read = {g for j in judges.values() for c in judge_cells(_shape(gens, datasets, judges), j) for g in (c[0], c[2])}
    datasets = {d: v for d, v in datasets.items() if any(d in (j.get("datasets") or datasets) for j in judges.values())}
    gens = [g for g in gens if g in read]
    shape = _shape(gens, datasets, judges)
    seed = draw(st.integers(0, 2**32 - 1))
    all_unparsed = draw(st.sampled_from([None, None, None, *judges]))  # one judge parses nothing at all
    frames = {
        j: judgments(shape, j, judge, items, samples, seed + k, j == all_unparsed)
        for k, (j, judge) in enumerate(judges.items())
    }
    panels = {}
    by_shape: dict = {}
    for name, judge in judges.items():
        if "generators" not in judge and "datasets" not in judge:
            by_shape.setdefault((judge["mode"], judge["pairs"], judge["baseline"]), []).append(name)
    for (mode, _, _), members in by_shape.items():
        if len(members) >= 2:
            rule = "mean" if mode == "score" else draw(st.sampled_from(["majority", "unanimous"]))
            panels[f"p_{members[0]}"] = {"judges": members, "rule": rule}
    labelled = [j for j, judge in judges.items() if judge["mode"] != "pairwise" and draw(st.booleans())]
    unfinished = draw(st.sampled_from(["incorrect", "incorrect", "leave_out"]))  # report.unfinished_reasoning
    for d in shape["_datasets"]:  # each dataset's answer extraction, drawn last
        shape["_datasets"][d]["answer"] = draw(st.sampled_from(ANSWERS))
    return {
        "shape": shape,
        "frames": frames,
        "panels": panels,
        "labelled": labelled,
        "seed": seed,
        "unfinished_reasoning": unfinished,
    }


def _shape(gens, datasets, judges) -> dict:
    return {"_generators": list(gens), "_datasets": dict(datasets), "_judges": dict(judges)}


def judgments(shape: dict, name: str, judge: dict, items: dict, samples: int, seed: int, none_parsed: bool):
    """One judge's judgments table over its cells, drawn with numpy from `seed`."""
    rng = np.random.default_rng(seed)
    rows = []
    mode = judge["mode"]
    for g, d, opp in judge_cells(shape, judge):
        for item in items[d]:
            for turn in range(1, item["turns"] + 1):
                for s in range(samples):
                    out = str(rng.choice(OUTPUTS))
                    ref = item["reference"]
                    verdict = None if none_parsed else rng.choice(np.array(VERDICTS[mode], dtype=object))
                    skipped = "too long for the judge: made up" if rng.random() < 0.06 else None
                    row = {
                        "judge": name,
                        "generator": g,
                        "dataset": d,
                        "opponent": opp,
                        "id": item["id"],
                        "turn": turn,
                        "sample": s,
                        "category": item["category"],
                        "prompt": "q",
                        "reference": ref,
                        "output": out,
                        "exact_match": None if ref is None else normalise(out) == normalise(ref),
                        "answer_extracted": None,
                        "answer_reason": None,
                        "answer_extraction": str(rng.choice(HOWS)),
                        "answer_strict": bool(rng.random() < 0.5),
                        "decided_by": str(rng.choice(["judge", "judge", "judge", "rule"])),
                        "judge_output": "x",
                        "p_correct": float(rng.random()) if mode == "reference" and rng.random() < 0.3 else np.nan,
                        "verdict": verdict,
                        "unparsed_reason": "no verdict marker" if verdict is None else None,
                        "unparsed_detail": None,
                        "finish_reason": str(rng.choice(["stop", "stop", "length"])),
                        "skipped": skipped,
                    }
                    if mode == "pairwise":
                        consistent = verdict is not None and (verdict != "tie" or rng.random() < 0.5)
                        o0 = verdict if consistent else (None if verdict is None else str(rng.choice(["win", "loss"])))
                        o1 = verdict if consistent else (None if o0 is None else ("loss" if o0 == "win" else "win"))
                        row.update(
                            outcome_order0=o0,
                            outcome_order1=o1,
                            position_consistent=None if verdict is None else consistent,
                            opponent_output=None if opp is None else str(rng.choice(OUTPUTS)),
                        )
                    row["reasoning_state"] = "absent"
                    if not skipped and rng.random() < 0.08:  # a trace that never closed: no answer, never judged
                        row.update(
                            reasoning_state="unclosed",
                            output="",
                            decided_by="reasoning not finished",
                            judge_output=None,
                            verdict=None,
                            unparsed_reason=REASONING_UNFINISHED,
                            exact_match=None,
                        )
                        if mode == "pairwise":
                            row.update(outcome_order0=None, outcome_order1=None, position_consistent=None)
                    if skipped:
                        row.update(verdict=None, unparsed_reason=None, exact_match=None)
                        if mode == "pairwise":
                            row.update(outcome_order0=None, outcome_order1=None, position_consistent=None)
                    rows.append(row)
    df = pd.DataFrame(rows)
    if mode == "score":
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
    return df


def labels_for(df: pd.DataFrame, mode: str, rng) -> pd.DataFrame:
    """Human labels of some answered (generator, dataset, turn, id), one each."""
    kept = df[df["skipped"].isna()].drop_duplicates(["generator", "dataset", "turn", "id"])
    kept = kept[rng.random(len(kept)) < 0.7]
    values = ["correct", "incorrect"] if mode == "reference" else ["1", "7", "10"]
    return pd.DataFrame(
        {
            "generator": kept["generator"],
            "dataset": kept["dataset"],
            "turn": kept["turn"].astype(int),
            "id": kept["id"],
            "label": [str(rng.choice(values)) for _ in range(len(kept))],
        }
    )


@functools.cache
def _base() -> str:
    return json.dumps(
        wfconfig.defaults(run="ref", dataset={"path": "d.jsonl"}, generator={"model": "g"}, judge={"model": "j"})
    )


def base_config() -> dict:
    """The schema's defaults with the names every study shares (validated once)."""
    return json.loads(_base())


def studies_per_module() -> int:
    """Half the studies summary.json is checked on (two modules share them): 500 in all, or
    GENJUDGE_TEST_REFERENCE_STUDIES (`make test-fast` checks the first 50)."""
    return int(os.environ.get("GENJUDGE_TEST_REFERENCE_STUDIES", "500")) // 2


def check_study(study: dict, tmp: Path) -> dict:
    """Write the study's judgments (and labels), compute the summary from the files, and compare it with
    the reference computed from the same files; returns the summary."""
    shape = study["shape"]
    rng = np.random.default_rng(study["seed"])
    judges_cfg, labels = {}, {}
    for j, judge in shape["_judges"].items():
        section = {k: judge[k] for k in ("mode", "pairs", "baseline", "score_range") if judge[k] is not None}
        if judge.get("outside_baseline"):  # pairwise against another run's answers: a file that exists
            section["baseline"] = str(tmp / "baseline.parquet")
            pd.DataFrame({"id": ["q"], "output": ["o"]}).to_parquet(section["baseline"])
        section.update({k: judge[k] for k in ("generators", "datasets") if k in judge})
        if j in study["labelled"]:
            lab = labels_for(study["frames"][j], judge["mode"], rng)
            if len(lab):
                path = tmp / f"labels-{j}.jsonl"
                path.write_text("".join(json.dumps(r) + "\n" for r in lab.to_dict("records")))
                fields = {"generator": "generator", "dataset": "dataset", "turn": "turn"}
                section["labels"] = {"path": str(path), "fields": fields}
                labels[j] = lab.astype({"turn": int})
        judges_cfg[j] = section
    # The maps' entries are validated when the experiment is resolved, as the workflow's are.
    base = base_config()
    cfg = {
        **base,
        # The controlled comparisons' bootstrap refits a GLM per resample; this reference does not
        # recompute them (tests/test_controlled.py checks them against statsmodels), so none is drawn.
        "report": {**base["report"], "bootstrap": 0, "unfinished_reasoning": study["unfinished_reasoning"]},
        "generators": {g: {} for g in shape["_generators"]},
        "datasets": {d: {"answer": dict(v.get("answer") or {})} for d, v in shape["_datasets"].items()},
        "judges": judges_cfg,
        "panels": study["panels"],
    }
    paths = {}
    for j, df in study["frames"].items():
        paths[j] = tmp / f"{j}.parquet"
        df.to_parquet(paths[j], index=False)
    gen_metas = [
        GenerateMeta(generator=g, dataset=d, started_at=0.0, finished_at=1.0)
        for g in shape["_generators"]
        for d in shape["_datasets"]
    ]
    judge_metas = {j: JudgeMeta(started_at=0.0, finished_at=1.0) for j in shape["_judges"]}
    run, _, _ = summary_of(cfg, {j: read_judgments(p) for j, p in paths.items()}, gen_metas, judge_metas)
    s = json.loads(json.dumps(run.to_dict()))  # as summary.json holds it
    strengths = {j: m.get("bradley_terry", {}) for j, m in s["across_cells"].items()}
    want = expected(
        {**shape, "panels": study["panels"], "report": {"unfinished_reasoning": study["unfinished_reasoning"]}},
        {j: pd.read_parquet(p) for j, p in paths.items()},
        strengths,
        labels,
    )
    cells = want["cells"]
    problems = []
    if len(cells) == 1:
        problems += compare(next(iter(cells.values())), s, "summary")
    else:
        assert list(s["cells"]) == list(cells)
        for key, fig in cells.items():
            problems += compare(fig, s["cells"][key], f"cells[{key}]")
    problems += compare(want["run"], s, "summary")
    assert not problems, "\n".join(problems[:30])
    return s
