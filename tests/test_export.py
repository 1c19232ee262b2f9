"""Exports to Every Eval Ever: every record validates against the published schema, every aggregate's
figures are summary.json's, and the instance records give each headline figure back by the rules the
docs state. Studies made up (no model, no Snakemake: reference, pairwise with ties, a panel, turns,
samples, a failed cell, and drawn ones) and one real run of every mode (the `snakemake` command line)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import genjudge_cli, new_workflow
from eee import exported, interval, problems, reaggregate, scores, validators
from hypothesis import HealthCheck, given, settings
from reference_studies import _shape, base_config, judgments, labels_for, studies

from genjudge import __version__
from genjudge.config.export import export_settings
from genjudge.export.eee import export_eee
from genjudge.export.inputs import RunData
from genjudge.stages.report import read_judgments, summary_of
from genjudge.store.records import GenerateMeta, JudgeMeta

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = "Question: {question}\nAnswer: {candidate}\n"


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    """The published schema's validators: the wheel fetched once into the run's machine cache."""
    cache = os.environ.get("GENJUDGE_MACHINE_CACHE") or str(tmp_path_factory.mktemp("machine"))
    return validators(Path(cache) / "every-eval-ever-0.3.0")


# --- studies made up -------------------------------------------------------------------------------


def items_of(study_items: dict) -> dict:
    """Each dataset's item table, as the split stage writes it (turns as a JSON list of questions)."""
    out = {}
    for d, rows in study_items.items():
        turns = [
            None if r["turns"] == 1 else json.dumps([{"question": f"q{t}", "reference": None} for t in (1, 2)])
            for r in rows
        ]
        out[d] = pd.DataFrame(
            {
                "id": [r["id"] for r in rows],
                "prompt": "q",
                "reference": [r["reference"] for r in rows],
                "category": [r["category"] for r in rows],
                "turns": turns,
            }
        )
    return out


def run_data(study: dict, tmp: Path, failed: tuple | None = None, items: dict | None = None):
    """(settings, run data, summary) of a made-up study as the report stage would leave it; `failed`: a
    (generator, dataset) whose generation failed (its rows left out, its meta holding the error)."""
    shape = study["shape"]
    rng = np.random.default_rng(study["seed"])
    judges_cfg = {}
    for j, judge in shape["_judges"].items():
        section = {k: judge[k] for k in ("mode", "pairs", "baseline", "score_range") if judge[k] is not None}
        section.update({k: judge[k] for k in ("generators", "datasets") if k in judge})
        if j in study.get("labelled", []):
            lab = labels_for(study["frames"][j], judge["mode"], rng)
            if len(lab):
                path = tmp / f"labels-{j}.jsonl"
                path.write_text("".join(json.dumps(r) + "\n" for r in lab.to_dict("records")))
                fields = {"generator": "generator", "dataset": "dataset", "turn": "turn"}
                section["labels"] = {"path": str(path), "fields": fields}
        judges_cfg[j] = section
    base = base_config()
    cfg = {
        **base,
        "report": {**base["report"], "bootstrap": 0, "unfinished_reasoning": study["unfinished_reasoning"]},
        "generators": {g: {} for g in shape["_generators"]},
        "datasets": {d: {"answer": dict(v.get("answer") or {})} for d, v in shape["_datasets"].items()},
        "judges": judges_cfg,
        "panels": study["panels"],
    }
    frames = {}
    for j, df in study["frames"].items():
        if failed:
            df = df[~((df["generator"] == failed[0]) & (df["dataset"] == failed[1]))]
        df.to_parquet(tmp / f"{j}.parquet", index=False)
        frames[j] = read_judgments(tmp / f"{j}.parquet")
    error = {"type": "InputError", "message": f"made up: {tmp}/models/x is too short", "log": "x.log", "at": 1.0}
    gen_metas = [
        GenerateMeta(generator=g, dataset=d, started_at=0.0, finished_at=1.0, error=error if (g, d) == failed else None)
        for g in shape["_generators"]
        for d in shape["_datasets"]
    ]
    judge_metas = {j: JudgeMeta(started_at=0.0, finished_at=1.0) for j in shape["_judges"]}
    run, _, _ = summary_of(cfg, frames, gen_metas, judge_metas)
    summary = json.loads(json.dumps(run.to_dict()))  # as summary.json holds it
    data = RunData(
        summary=summary,
        provenance={"packages": {"genjudge": __version__}},
        judgments=frames,
        gen_metas=gen_metas,
        judge_metas=judge_metas,
        items=items or {},
        templates={j: [(None, TEMPLATE)] for j in shape["_judges"]},
    )
    return export_settings(cfg, tmp), data, summary


def study(gens, datasets, judges, n_items=6, samples=1, turns=1, seed=1, panels=None, unfinished="incorrect"):
    shape = _shape(gens, {d: {} for d in datasets}, judges)
    items = {
        d: [
            {"id": f"q{i}", "category": ["x", None][i % 2], "reference": ["4", "cat", None][i % 3], "turns": turns}
            for i in range(n_items)
        ]
        for d in datasets
    }
    frames = {
        j: judgments(shape, j, judge, items, samples, seed + k, False) for k, (j, judge) in enumerate(judges.items())
    }
    return {
        "shape": shape,
        "frames": frames,
        "panels": panels or {},
        "seed": seed,
        "unfinished_reasoning": unfinished,
        "items": items,
    }


def judge(mode, **kw):
    return {"mode": mode, "pairs": "baseline", "baseline": None, "score_range": [1, 10], **kw}


STUDIES = {
    "reference": lambda: study(["g0"], ["d0"], {"j0": judge("reference")}),
    "pairwise with ties": lambda: study(["g0", "g1", "g2"], ["d0"], {"j0": judge("pairwise", baseline="g0")}, 12),
    "panel": lambda: study(
        ["g0", "g1"],
        ["d0"],
        {"a": judge("reference"), "b": judge("reference"), "c": judge("reference")},
        panels={"p": {"judges": ["a", "b", "c"], "rule": "majority"}},
    ),
    "turns": lambda: study(["g0", "g1"], ["d0"], {"j0": judge("score")}, turns=2),
    "samples": lambda: study(["g0"], ["d0", "d1"], {"j0": judge("reference")}, samples=3),
}


def figure_of(summary: dict, row: dict) -> dict:
    """summary.json's figures of one exported cell (a judge's, or a panel's per-cell measures)."""
    details = row["source_metadata"]["additional_details"]
    key = f"{details['generator']}/{details['dataset']}" + (
        f" vs {details['opponent']}" if "opponent" in details else ""
    )
    panels = summary["validity"].get("panels") or {}
    if row["evaluation_id"].split("/")[3] == "panel":
        return panels[details["judge"]]["cells"][key]
    cells = summary["cells"] or {"only": summary}
    for s in cells.values():
        lead = s["leaderboard"][0]
        if (lead["generator"], lead["dataset"], lead["judge"], lead["opponent"] or None) == (
            details["generator"],
            details["dataset"],
            details["judge"],
            details.get("opponent"),
        ):
            return s
    raise AssertionError(f"no figures in summary.json for {key} ({details['judge']})")


def check_export(root: Path, summary: dict, schema) -> list:
    """Validates every record, and compares the headline of each cell with summary.json and with the
    instance records read back; returns the cells' (aggregate, instances)."""
    assert problems(root, schema) == []
    cells = exported(root)
    assert cells
    for path, record, instances in cells:
        got = scores(record)
        if not got:
            continue
        head = record["evaluation_results"][0]
        rid = head["evaluation_result_id"]
        fig = figure_of(summary, record)
        want = fig.get(rid) if "leaderboard" not in fig else None
        if want is None:  # a judge's cell: the leaderboard row's figure of that name
            want = fig["leaderboard"][0][rid]
        assert head["score_details"]["score"] == want["value"], (path.name, rid)
        assert interval(record, rid) == want["ci95"]
        method = (head["score_details"]["uncertainty"].get("confidence_interval") or {}).get("method", "")
        assert want["ci95"] is None or method.startswith(("Wilson", "normal")), method
        back = reaggregate(instances)
        assert rid in back
        for k in set(back) & set(got):
            assert back[k] == got[k], (path.name, k, back[k], got[k])
    return cells


@pytest.mark.parametrize("name", list(STUDIES))
def test_the_export_of_each_kind_of_study_validates_and_gives_the_report_back(name, schema, tmp_path):
    s = STUDIES[name]()
    settings_, data, summary = run_data(s, tmp_path)
    export_eee(settings_, data, tmp_path / "eee")
    cells = check_export(tmp_path / "eee", summary, schema)
    kinds = {r["evaluation_id"].split("/")[3] for _, r, _ in cells}
    records = [x for _, _, xs in cells for x in xs]
    if name == "pairwise with ties":
        assert any(x["metadata"].get("verdict") == "tie" and x["evaluation"]["score"] == 0.5 for x in records)
        both = [x for x in records if x["metadata"]["decided_by"] == "judge" and x["metadata"]["counted"] == "true"]
        assert both and all(len(x["answer_attribution"]) == 3 for x in both)  # both orders, then the verdict
    if name == "panel":
        assert kinds == {"judge", "panel"}
        votes = [x for x in records if x["evaluation_id"].split("/")[3] == "panel" and x["answer_attribution"]]
        assert votes and all(len(x["answer_attribution"]) == 4 for x in votes)  # three votes and the verdict
    if name == "turns":
        assert {x["interaction_type"] for x in records} == {"single_turn", "multi_turn"} or all(
            x["interaction_type"] == "multi_turn" for x in records
        )
        second = [x for x in records if x["metadata"]["turn"] == "2"]
        assert second and all(len(x["messages"]) == 4 and x["output"] is None for x in second)
        assert any("/turn_2" in k for _, r, _ in cells for k in scores(r))
    if name == "samples":
        for _, r, xs in cells:
            assert [k for k in scores(r) if k.startswith("samples/pass_at_k/")] == [
                f"samples/pass_at_k/k_{k}" for k in (1, 2, 3)
            ]
            assert reaggregate(xs)["samples/pass_at_k/k_3"] == scores(r)["samples/pass_at_k/k_3"]


def test_a_failed_cell_carries_its_error_and_claims_no_score(schema, tmp_path):
    s = study(["g0", "g1"], ["d0"], {"j0": judge("reference")})
    settings_, data, summary = run_data(s, tmp_path, failed=("g1", "d0"), items=items_of(s["items"]))
    assert [(f["generator"], f["stage"]) for f in summary["failed_cells"]] == [("g1", "generate")]
    export_eee(settings_, data, tmp_path / "eee")
    cells = check_export(tmp_path / "eee", summary, schema)
    failed = [(r, xs) for _, r, xs in cells if r["source_metadata"]["additional_details"]["generator"] == "g1"]
    ((record, records),) = failed
    assert record["evaluation_results"] == []
    assert record["source_metadata"]["additional_details"]["cell_status"] == "failed"
    assert len(records) == 6 and all(x["metadata"]["counted"] == "false" for x in records)
    assert all(x["error"].startswith("failed at generate: InputError: made up: <path> is too short") for x in records)
    assert (
        str(tmp_path) not in (tmp_path / "eee").joinpath(record["detailed_evaluation_results"]["file_path"]).read_text()
    )


def test_adding_a_generator_rewrites_only_its_cells_and_the_aggregates_it_moves(schema, tmp_path):
    """The same study with a third generator: its answers and verdicts, the first two's as they were."""
    judges = {"ref": judge("reference"), "pair": judge("pairwise", baseline="g0")}
    more = study(["g0", "g1", "g2"], ["d0"], judges, 8)
    first = {
        **more,
        "shape": _shape(["g0", "g1"], {"d0": {}}, judges),
        "frames": {j: df[df["generator"] != "g2"].reset_index(drop=True) for j, df in more["frames"].items()},
    }
    root = tmp_path / "eee"
    for s, where in ((first, "first"), (more, "more")):
        (tmp_path / where).mkdir()
        settings_, data, summary = run_data(s, tmp_path / where)
        export_eee(settings_, data, root)
        if where == "first":
            before = state(root)
    check_export(root, summary, schema)
    after = state(root)
    manifest = json.loads((root / "manifest.json").read_text())["cells"]
    own = {p for c in manifest if c["generator"] == "g2" for p in (c["aggregate"], c["instances"])}
    assert own and not own & set(before) and set(after) == set(before) | own
    rewritten = {p for p in before if after[p] != before[p]} - {"manifest.json"}
    # A pairwise aggregate holds the strengths of every generator its judge met: that one moves, nothing else.
    moved = {c["aggregate"] for c in manifest if c["judge"] == "pair" and c["generator"] != "g2"}
    assert rewritten == moved and len(moved) == 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=studies())
def test_drawn_studies_export_what_the_report_says(drawn, schema, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drawn")
    settings_, data, summary = run_data(drawn, tmp)
    export_eee(settings_, data, tmp / "eee")
    check_export(tmp / "eee", summary, schema)


# --- one real run of every mode ------------------------------------------------------------------

MT = [
    {
        "id": "mt-1",
        "category": "arithmetic",
        "turns": ["What is 2 + 3?", "Now multiply that by 4."],
        "reference": ["5", "20"],
    },
    {"id": "mt-2", "category": "arithmetic", "turns": ["What is 10 - 4?", "Add 1."], "reference": ["6", "7"]},
]


def study_config(wf):
    """The demo models on 6 demo questions and 2 two-turn items: two generators (one sampling 2 answers
    per item), two reference judges and their panel, a pairwise judge (both orders) on the questions, and
    a score judge of one generator's conversations."""
    sampled = {"n_samples": 2, "do_sample": True, "temperature": 1.5, "dtype": "float32"}
    return wf.write_config(
        "study.yaml",
        run="study",
        shards=1,
        generator={"max_new_tokens": 8},
        generators={"demo": {}, "sampled": sampled},
        datasets={
            "q": {"path": "q.jsonl"},
            "mt": {"path": "mt.jsonl", "fields": {"id": "id", "prompt": "turns", "reference": "reference"}},
        },
        judges={
            "ref": {"datasets": ["q"]},
            "ref2": {"datasets": ["q"]},
            "pair": {
                "model": "models/pair-judge",
                "mode": "pairwise",
                "template": None,
                "baseline": "demo",
                "datasets": ["q"],
            },
            "score": {"model": "models/score-judge", "mode": "score", "template": None, "generators": ["demo"]},
        },
        panels={"both": {"judges": ["ref", "ref2"], "rule": "majority"}},
        report={"export": ["eee"], "bootstrap": 0},
    )


@pytest.fixture(scope="module")
def real(tmp_path_factory, built_models):
    """The study run once by `snakemake --cores 2` for the module's tests that read it."""
    from judges import constant_judge  # imports torch: only where a real run needs its judges

    wf = new_workflow(tmp_path_factory.mktemp("export"), built_models)
    constant_judge(wf.path / "models" / "pair-judge", "pairwise", "VERDICT: A")  # a tie whenever swapped
    constant_judge(wf.path / "models" / "score-judge", "score", "SCORE: 7")
    lines = (wf.path / "config/demo/questions.jsonl").read_text().splitlines()
    (wf.path / "q.jsonl").write_text("\n".join(lines[:6]) + "\n")
    (wf.path / "mt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MT))
    wf.cfg = study_config(wf)
    wf.run("--cores", "2", "--configfile", wf.cfg)
    return wf


def export_dir(wf) -> Path:
    return wf.results("study") / "export" / "eee"


def state(root: Path) -> dict:
    """Each file under `root`: (bytes, mtime)."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.workflow
def test_every_mode_of_a_real_run_exports_what_the_report_says(real, schema):
    summary = json.loads((real.results("study") / "report" / "summary.json").read_text())
    assert summary["failed_cells"] == []
    cells = check_export(export_dir(real), summary, schema)
    records = [x for _, _, xs in cells for x in xs]
    ids = {r["evaluation_id"].split("/", 3)[3] for _, r, _ in cells}
    assert ids >= {
        "judge/ref/demo",
        "judge/ref/sampled",
        "judge/score/demo",
        "judge/pair/sampled/vs/demo",
        "panel/both/demo",
    }
    assert {x["interaction_type"] for x in records} == {"single_turn", "multi_turn"}
    assert {x["metadata"]["sample"] for x in records} == {"0", "1"}
    pair = [x for _, r, xs in cells if "/pair/" in r["evaluation_id"] for x in xs]
    # The judge says A in both orders: the candidate wins shown as A and loses shown as B, a tie.
    assert pair and all(x["metadata"]["verdict"] == "tie" and x["evaluation"]["score"] == 0.5 for x in pair)
    assert all("VERDICT: A" in x["metadata"]["judge_output (candidate shown as B)"] for x in pair)
    judged = [x for x in records if x["metadata"].get("decided_by") == "judge"]
    assert judged and all(int(x["metadata"]["judge_input_tokens"]) > 0 for x in judged)
    assert all(x["token_usage"]["output_tokens"] > 0 for x in records)
    manifest = json.loads((export_dir(real) / "manifest.json").read_text())
    assert len(manifest["cells"]) == len(cells) and (real.path / "logs/study/export/eee.log").exists()


@pytest.mark.workflow
def test_no_path_of_this_machine_reaches_the_export(real):
    banned = [str(real.path), str(real.path.parent), "models/", "q.jsonl", "config/", os.path.expanduser("~") + "/"]
    hits = [
        (p.name, b) for p in export_dir(real).rglob("*") if p.is_file() for b in banned if b.encode() in p.read_bytes()
    ]
    assert hits == []


@pytest.mark.workflow
def test_a_rerun_with_nothing_changed_rewrites_nothing(real):
    before = state(export_dir(real))
    dry = real.run("-n", "--configfile", real.cfg)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    out = genjudge_cli("export", real.results("study"), "--format", "eee", check=True)
    assert "0 file(s) written" in out.stdout
    assert state(export_dir(real)) == before


@pytest.mark.workflow
def test_the_command_writes_what_the_rule_wrote_and_names_bad_input(real, tmp_path):
    wf = real.copy(tmp_path)
    rule = {k: v for k, (v, _) in state(export_dir(wf)).items()}
    shutil.rmtree(export_dir(wf))
    genjudge_cli("export", wf.results("study"), "--format", "eee", check=True)
    command = {k: v for k, (v, _) in state(export_dir(wf)).items()}
    assert set(command) == set(rule)

    def without_time(b: bytes) -> dict:
        return {**json.loads(b), "retrieved_timestamp": None}

    assert all(command[k] == v or without_time(command[k]) == without_time(v) for k, v in rule.items())
    missing = genjudge_cli("export", wf.path / "results" / "nope", "--format", "eee")
    assert missing.returncode == 1 and "no report/provenance.json" in missing.stderr
    (wf.path / "config/templates/score.txt").write_text("SCORE? {question} {candidate}\n")
    changed = genjudge_cli("export", wf.results("study"), "--format", "eee")
    assert changed.returncode == 1
    assert "config/templates/score.txt: judge 'score''s templates changed since it judged" in changed.stderr
