"""summary.json against a second, independent computation (tests/reference.py) on studies made up
by hypothesis (tests/reference_studies.py), and on every example config's planned shape. Together
with test_reference_computation_more.py: 500 studies, the same ones every run (two modules, so that
`make test`'s workers share them)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from judges import ROOT
from reference_studies import _shape, check_study, judgments, studies, studies_per_module

from genjudge import config as wfconfig

STUDIES = studies_per_module()  # here (250); as many more in test_reference_computation_more.py


@settings(
    max_examples=STUDIES,
    deadline=None,
    derandomize=True,  # the same studies every run: a suite that cannot flake
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(studies())
def test_summary_json_agrees_with_the_reference_computation(study):
    with tempfile.TemporaryDirectory() as tmp:
        check_study(study, Path(tmp))


def test_the_check_fails_on_a_free_rank_and_an_interval_over_answers():
    """Errors of earlier rounds, put into a summary by hand, are differences the check reports."""
    import copy

    from reference import cluster_rate, compare, table, wilson

    # Three items of three answers each: the interval is clustered by item, wider than Wilson over 9.
    clustered = cluster_rate([1, 1, 1, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert clustered["n_effective"] < 9
    assert compare({"accuracy": clustered}, {"accuracy": {**clustered, "ci95": wilson(6 / 9, 9)}})
    # `a` alone in the column of judge j: no rank there.
    judges = {"j": {"mode": "reference", "pairs": "baseline", "baseline": None, "generators": ["a"]}}
    rate = {"value": 0.5, "ci95": [0.2, 0.8], "n": 4}
    want = table(
        _shape(["a", "b"], {"d": {}}, judges),
        [{"generator": "a", "dataset": "d", "judge": "j", "accuracy": rate, "n_judged": 4}],
        {},
    )
    assert want["rows"][0]["values"]["d/j"]["rank"] is None and want["rows"][0]["mean_rank"] is None
    free = copy.deepcopy(want)
    free["rows"][0]["values"]["d/j"]["rank"], free["rows"][0]["mean_rank"], free["rows"][0]["n_ranked"] = 1.0, 1.0, 1
    assert len(compare(want, free)) == 3


# --- the example configs -------------------------------------------------------------------------

# The reference computation covers the modes reference, score and pairwise; a rubric study's figures are
# checked against tests/reference.py's own rubric computation in tests/test_rubric.py and
# tests/test_rubric_workflow.py. Named here, so that no other example is left out unseen.
RUBRIC_EXAMPLES = {"healthbench"}
EXAMPLES = sorted(p for p in (ROOT / "config" / "examples").glob("*.yaml") if p.stem not in RUBRIC_EXAMPLES)


def test_the_examples_left_to_the_rubric_tests_are_exactly_the_rubric_ones():
    rubric = {p.stem for p in (ROOT / "config" / "examples").glob("*.yaml") if "mode: rubric" in p.read_text()}
    assert rubric == RUBRIC_EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_configs_planned_shape_agrees_with_the_reference(path, tmp_path):
    """Each example's generators, datasets, judges, panels, modes, samples and turns (MT-bench's two),
    its judgments drawn at random, summary.json against the reference."""
    from genjudge.config.experiment import resolve

    files = [ROOT / "config" / "demo.yaml", path] if path.stem.startswith("demo") else [path]
    cfg = wfconfig.load([str(f) for f in files])
    exp = resolve(cfg, check_pairs=False)
    judges = {}
    for name, section in exp.judges.items():
        baseline = section["baseline"] if section["baseline"] in exp.generators else None
        judge = {"mode": section["mode"], "pairs": section["pairs"], "baseline": baseline}
        judge["outside_baseline"] = section["mode"] == "pairwise" and baseline is None and section["pairs"] != "all"
        judge["score_range"] = section["score_range"]
        judge.update({k: section[k] for k in ("generators", "datasets") if section[k]})
        judges[name] = judge
    shape = _shape(list(exp.generators), {d: exp.datasets[d] for d in exp.datasets}, judges)
    rng = np.random.default_rng(len(path.stem))
    items = {
        d: [
            {
                "id": f"{d}-{i}",
                "category": str(rng.choice(["math", "writing"])) if ds["fields"]["category"] else None,
                "reference": str(rng.choice(["4", "cat"])) if ds["fields"]["reference"] else None,
                "turns": 2 if ds["fields"]["prompt"] == "turns" and i % 3 else 1,
            }
            for i in range(8)
        ]
        for d, ds in exp.datasets.items()
    }
    samples = max(g["n_samples"] for g in exp.generators.values())
    frames = {j: judgments(shape, j, judge, items, samples, k, False) for k, (j, judge) in enumerate(judges.items())}
    panels = {n: dict(p) for n, p in (cfg.get("panels") or {}).items()}
    study = {
        "shape": shape,
        "frames": frames,
        "panels": panels,
        "labelled": [],
        "seed": 0,
        "unfinished_reasoning": cfg["report"]["unfinished_reasoning"],
    }
    s = check_study(study, tmp_path)
    assert s["n_answers"] > 0 and s["table"]["columns"]
