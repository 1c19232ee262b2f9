"""Sampled runs of the real workflow on the demo models (CPU, fp32): the same text per item
whatever the shard count, batch size or kill and resume; n_samples gives k judged rows per item."""

import json

import pandas as pd
import pytest
from conftest import new_workflow
from test_resume import complete_lines, kill_job_when, start

pytestmark = pytest.mark.workflow

SAMPLED = {"do_sample": True, "temperature": 1.5, "dtype": "float32"}
MERGED = "generations/demo-generator/questions.parquet"


def generate(workflow, run, shards, batch_size, **extra):
    """Merged generations of a sampled run with its own cache (the judge is not run)."""
    kw = {"run": run, "shards": shards, "cache_dir": f"results/.cache-{run}", "generator": {**SAMPLED, **extra}}
    kw["generator"]["batch_size"] = batch_size
    cfg = workflow.write_config(f"{run}.yaml", **kw)
    workflow.run("--cores", "2", f"results/{run}/{MERGED}", "--configfile", cfg)
    return pd.read_parquet(workflow.results(run) / MERGED), cfg


def texts(df):
    return df.set_index(["id", "sample"])["output"].sort_index()


@pytest.fixture(scope="module")
def k_samples(tmp_path_factory, built_models):
    """One finished sampled run `demo` (one shard, batches of 4, three samples per item, judged and
    reported) the module's tests read: the k judged rows per item, and the first sample to match."""
    wf = new_workflow(tmp_path_factory.mktemp("k_samples"), built_models)
    cfg = wf.write_config(shards=1, generator={**SAMPLED, "n_samples": 3, "batch_size": 4})
    wf.run("--cores", "2", "--configfile", cfg)
    return wf


def test_sampled_outputs_do_not_depend_on_shards_batch_size_or_a_kill(k_samples, tmp_path):
    workflow = k_samples.copy(tmp_path)
    two, _ = generate(workflow, "two", 2, 16)
    # More samples per item leave the first as it was (the module's run: one shard in batches of 4, three
    # samples per item; the two-shard run is the one to match).
    k = pd.read_parquet(workflow.results() / MERGED)
    assert texts(two).to_dict() == texts(k[k["sample"] == 0]).to_dict()
    assert len(k) == 132
    assert two["output"].nunique() > 10  # sampled at temperature 1.5: varied answers

    # One shard in batches of 2, killed once half its items are checkpointed, then resumed.
    kw = {"run": "killed", "shards": 1, "cache_dir": "results/.cache-killed"}
    kw["generator"] = {**SAMPLED, "batch_size": 2}
    cfg = workflow.write_config("killed.yaml", **kw)
    store = workflow.path / "results/.cache-killed/generations"
    proc = start(workflow, cfg)
    kill_job_when(proc, "generate.py", store, 20)
    proc.communicate(timeout=600)
    assert proc.returncode != 0
    done = complete_lines(store)
    assert 20 <= done < 44
    workflow.run("--cores", "2", f"results/killed/{MERGED}", "--configfile", cfg)
    meta = workflow.metas("killed")[0]
    assert meta["resumed_items"] == done and meta["computed_items"] == 44 - done
    resumed = pd.read_parquet(workflow.results("killed") / MERGED)
    assert texts(resumed).to_dict() == texts(two).to_dict()


def test_n_samples_gives_k_judged_rows_per_item(k_samples):
    workflow = k_samples
    res = workflow.results()
    gens = pd.read_parquet(res / MERGED)
    assert len(gens) == 3 * 44 and sorted(gens["sample"].unique()) == [0, 1, 2]
    assert not gens.duplicated(["id", "sample"]).any() and len(set(gens["key"])) == 3 * 44
    varied = gens.groupby("id")["output"].nunique()
    assert (varied > 1).sum() >= 10, varied.value_counts()  # the k samples of an item differ
    judged = pd.read_parquet(res / "judgments/demo-judge.parquet")
    assert len(judged) == 3 * 44 and not judged.duplicated(["id", "sample"]).any()
    s = json.loads((res / "report/summary.json").read_text())
    samples = s["samples"]
    assert samples["n_items"] == 44 and samples["n_samples"] == 3
    assert samples["pass_at_k"]["1"]["value"] == pytest.approx(samples["mean_accuracy"]["value"])
    assert samples["pass_at_k"]["3"]["value"] >= samples["pass_at_k"]["1"]["value"]
    assert "## Samples" in (res / "report/report.md").read_text()
    # The generate jobs' metas count rows (items x samples) and name k.
    assert sum(m["n_items"] for m in workflow.metas()) == 3 * 44 and {m["n_samples"] for m in workflow.metas()} == {3}


def test_n_samples_without_sampling_is_refused(workflow):
    cfg = workflow.write_config(generator={"n_samples": 2})
    out = workflow.run("--cores", "1", "--configfile", cfg, "-n", check=False)
    assert out.returncode != 0
    assert "generator.n_samples = 2 needs generator.do_sample: true" in out.stdout + out.stderr


def test_pairwise_samples_meet_the_opponents_sample_of_the_same_index(workflow):
    from judges import constant_judge

    from genjudge.judging import modes
    from genjudge.judging.templates import load_template, render

    constant_judge(workflow.path / "models" / "first-position-judge", "pairwise", "VERDICT: A")
    cfg = workflow.write_config(
        shards=1,
        generator={**SAMPLED, "n_samples": 2, "max_new_tokens": 8},
        generators={"hot": {"temperature": 1.5}, "warm": {"temperature": 1.2}},
        judge={
            "model": "models/first-position-judge",
            "mode": "pairwise",
            "max_new_tokens": 8,
            "template": None,
            "baseline": "warm",
        },
    )
    workflow.run("--cores", "2", "--configfile", cfg)
    res = workflow.results()
    hot = pd.read_parquet(res / "generations/hot/questions.parquet").set_index(["id", "sample"])
    warm = pd.read_parquet(res / "generations/warm/questions.parquet").set_index(["id", "sample"])["output"]
    raw = pd.read_parquet(res / "judge/first-position-judge/raw.parquet")
    assert len(raw) == 44 * 2 * 2 and sorted(raw["sample"].unique()) == [0, 1]
    template = load_template(workflow.path / "config/templates/pairwise.txt", modes.get("pairwise"))
    for r in raw.itertuples():
        row = hot.loc[(r.id, r.sample)]
        pair = (row["output"], warm[(r.id, r.sample)])
        a, b = pair if r.order == 0 else pair[::-1]
        shown = render(template, question=row["prompt"], reference=row["reference"], answer_a=a, answer_b=b)
        assert shown in r.judge_prompt, (r.id, r.sample, r.order)
    s = json.loads((res / "report/summary.json").read_text())
    assert s["samples"]["n_items"] == 44 and s["samples"]["n_samples"] == 2
    assert s["samples"]["tie_over_items"]["value"] == 1.0  # a first-position judge: every order flips
    assert s["samples"]["win_over_items"]["n"] == 44
