"""Every grading mode on small real models (CPU), including 8-bit and 4-bit judges."""

import io

import pandas as pd
import pytest
from judges import ROOT, constant_judge, judge_with

from genjudge.cluster.gpu_lease import Lease
from genjudge.config import defaults
from genjudge.config.experiment import Cell
from genjudge.config.specs import spec_for
from genjudge.demo.models import build_model
from genjudge.engine.loading import load_causal_lm, load_tokenizer
from genjudge.engine.logprob import label_token_ids
from genjudge.errors import InputError
from genjudge.judging import modes
from genjudge.stages.parse import parse_judgments
from genjudge.stages.report import summarise
from genjudge.stages.report_markdown import render_markdown
from genjudge.store.records import GenerateMeta

ITEMS = pd.DataFrame(
    {
        "id": [f"q{i}" for i in range(6)],
        "prompt": [
            "What is 2 + 3?",
            "What is the capital of Peru?",
            "How many legs does a spider have?",
            "What is 7 * 6?",
            "What is the plural of 'mouse'?",
            "What is 10 - 4?",
        ],
        "reference": ["5", "Lima", "8", "42", "mice", "6"],
        "category": ["arithmetic", "capitals", "counting", "arithmetic", "words", "arithmetic"],
        "output": ["5", "Cairo", "eight", "42.", "mouses", "The answer is 6"],
    }
)


@pytest.fixture(scope="module")
def gens_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("gens") / "generations.parquet"
    ITEMS.to_parquet(path)
    return path


@pytest.fixture(scope="module")
def random_judge(tmp_path_factory):
    return build_model(
        tmp_path_factory.mktemp("rj") / "judge",
        [ROOT / "config/demo/questions.jsonl", ROOT / "config/templates/reference.txt"],
        seed=1,
    )


def spec(model, **kw):
    return spec_for("judge", **{"model": str(model), "max_new_tokens": 12, "batch_size": 4, **kw})


def judge(tmp_path, gens_path, s):
    raw, meta = tmp_path / "raw.parquet", tmp_path / "raw.meta.json"
    template = s.template or ROOT / "config" / "templates" / f"{s.mode}.txt"
    m = judge_with(
        cells=[Cell("g", "d")],
        generations={("g", "d"): gens_path},
        out_path=raw,
        meta_path=meta,
        spec=s,
        template_path=template,
        store_dir=tmp_path / "store",
        run="t",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
    )
    df = parse_judgments(ITEMS.drop(columns=[]), pd.read_parquet(raw), s.mode)
    config = defaults(run="t", generator={"model": "g", "max_new_tokens": 8}, judge=s.as_dict())
    gen_meta = GenerateMeta(
        shard=0,
        n_items=6,
        cuda_visible_devices=None,
        hostname="h",
        load_seconds=1.0,
        generate_seconds=1.0,
        resumed_items=0,
        computed_items=6,
        tokens_per_second=1.0,
        started_at=0.0,
        finished_at=2.0,
    )
    summary = summarise(df, [gen_meta], m, config)
    md = render_markdown(summary, df)
    return m.to_dict(), pd.read_parquet(raw), df, summary.to_dict(), md


def test_reference_mode_with_cascade_sends_only_non_matches_to_the_judge(tmp_path, gens_path, random_judge):
    m, raw, df, s, md = judge(tmp_path, gens_path, spec(random_judge, cascade=True))
    # "5", "42." and "The answer is 6"? only exact matches after normalisation: "5" and "42."
    assert df.set_index("id")["decided_by"].to_dict() == {
        "q0": "rule",
        "q1": "judge",
        "q2": "judge",
        "q3": "rule",
        "q4": "judge",
        "q5": "judge",
    }
    assert m["computed_items"] == 4 and m["n_decided_by_rule"] == 2
    assert raw["judge_output"].isna().sum() == 2
    assert (df[df["decided_by"] == "rule"]["verdict"] == "correct").all()
    assert s["decided_by"] == {"judge": 4, "rule": 2}
    assert s["n_judged"] == df["verdict"].notna().sum() == 6 - s["n_unparsed"]
    assert "decided by | judge: 4, rule: 2" in md
    # which extraction the rule decided by (here the whole texts: no extraction configured)
    assert s["rule_extraction"] == {"whole text": 2} and "(rule, by extraction: whole text 2)" in md


def test_logprob_verdicts_are_never_unparsed(tmp_path, gens_path, random_judge):
    m, raw, df, s, md = judge(tmp_path, gens_path, spec(random_judge, verdict="logprob"))
    assert s["n_unparsed"] == 0 and s["n_judged"] == 6
    assert raw["judge_finish_reason"].eq("logprob").all()
    assert raw["judge_prompt"].str.endswith("VERDICT:").all()
    assert raw["p_correct"].between(0, 1).all()
    assert set(df["verdict"]) <= {"correct", "incorrect"}
    assert df["verdict"].eq("correct").tolist() == (raw["p_correct"] > 0.5).tolist()
    assert 0 <= s["mean_p_correct"] <= 1 and "mean judge probability of CORRECT" in md


def test_logprob_reads_the_probability_of_the_label_the_judge_says(tmp_path, gens_path):
    # A judge taught to always answer CORRECT: the probability of CORRECT must be the high one
    # (with the label token ids swapped it would be the low one).
    yes = constant_judge(tmp_path / "yes", "reference", "VERDICT: CORRECT")
    m, raw, df, s, md = judge(tmp_path, gens_path, spec(yes, verdict="logprob"))
    assert (raw["p_correct"] > 0.5).all() and (df["verdict"] == "correct").all()


def test_logprob_refuses_labels_that_share_a_first_token(random_judge):
    tok = load_tokenizer(str(random_judge))
    ref = modes.get("reference")
    assert len(set(label_token_ids(tok, ref.logprob_labels, "VERDICT:"))) == 2
    with pytest.raises(InputError, match="start with the same token"):
        label_token_ids(tok, labels=("CORRECT", "CORRECTLY"), marker="VERDICT:")


def test_score_mode_reads_the_last_score(tmp_path, gens_path):
    scorer = constant_judge(
        tmp_path / "scorer", "score", "The answer is close. SCORE: 3\nOn reflection SCORE: 7", steps=150
    )
    m, raw, df, s, md = judge(tmp_path, gens_path, spec(scorer, mode="score", max_new_tokens=40))
    assert s["n_unparsed"] == 0, raw["judge_output"].tolist()
    assert df["score"].tolist() == [7.0] * 6
    assert s["mean_score"]["value"] == 7.0 and "mean score (1-10) | 7.00" in md


@pytest.mark.parametrize("quantization,layer", [("8bit", "Linear8bitLt"), ("4bit", "Linear4bit")])
def test_quantized_judges_load_and_judge_on_cpu(tmp_path, gens_path, random_judge, quantization, layer):
    s = spec(random_judge, quantization=quantization)
    model, placement = load_causal_lm(s)
    assert type(model.model.layers[0].mlp.down_proj).__name__ == layer
    assert sum(placement.values()) > 0
    m, raw, df, summary, md = judge(tmp_path, gens_path, s)
    assert m["quantization"] == quantization and m["computed_items"] == 6
    assert raw["judge_output"].notna().all()
    assert summary["judge"]["quantization"] == quantization


def test_pairwise_skips_what_either_side_skipped_and_what_does_not_fit_the_judge(tmp_path):
    """An answer the generator skipped, an opponent's answer it skipped, and a pair too long for the
    judge's context (on_too_long: skip): each skipped in both orders, with its reason; with
    on_too_long: fail the pair too long for the judge fails its cell alone."""
    import json
    import shutil

    from genjudge.judging.modes.base import SKIPPED

    model = tmp_path / "judge"
    shutil.copytree(ROOT / "models" / "demo-judge", model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 350}))  # ~260 per pair
    a = ITEMS.assign(skipped=[None, "too long for the generator (turn 1): x", None, None, None, None])
    a.loc[5, "output"] = "The answer is 6, " + "which I checked twice over " * 40  # ~200 tokens more
    b = ITEMS.assign(skipped=[None, None, "too long for the generator (turn 1): y", None, None, None])
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    s = spec(model, mode="pairwise", baseline="b", max_new_tokens=4)

    def run(name, on_too_long):
        meta = judge_with(
            cells=[Cell("a", "d", "b")],
            generations={("a", "d"): tmp_path / "a.parquet", ("b", "d"): tmp_path / "b.parquet"},
            out_path=tmp_path / f"{name}.parquet",
            meta_path=tmp_path / f"{name}.meta.json",
            spec=s,
            template_path=ROOT / "config" / "templates" / "pairwise.txt",
            store_dir=tmp_path / "store",
            run="t",
            lease=Lease([], "none"),
            log_stream=io.StringIO(),
            on_too_long={"d": on_too_long},
            log_path="logs/j.log",
        )
        return meta, pd.read_parquet(tmp_path / f"{name}.parquet")

    meta, raw = run("skip", "skip")
    gone = raw[raw["decided_by"] == SKIPPED].groupby("id")["skipped"].agg(list).to_dict()
    assert set(gone) == {"q1", "q2", "q5"} and all(len(v) == 2 for v in gone.values())  # both orders
    assert gone["q1"][0] == "too long for the generator (turn 1): x"
    assert gone["q2"][0] == "the opponent's answer was skipped: too long for the generator (turn 1): y"
    assert gone["q5"][0].startswith("too long for the judge: the prompt as sent is ")
    assert meta.n_skipped == 6 and not meta.cell_errors and raw[raw["skipped"].isna()]["judge_output"].notna().all()
    df = parse_judgments(a, raw[raw["generator"] == "a"], "pairwise")
    assert df.set_index("id")["skipped"].notna().to_dict() == {f"q{i}": i in (1, 2, 5) for i in range(6)}
    assert df[df["skipped"].notna()][["verdict", "unparsed_reason"]].isna().all().all()

    meta, raw = run("fail", "fail")
    (error,) = meta.cell_errors["a/d vs b"]
    assert error["message"].startswith("cell a/d vs b: item 'q5': the prompt as sent is ")
    assert error["log"] == "logs/j.log" and raw.empty
