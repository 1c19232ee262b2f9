"""Item keys name what a result was computed from: a change of code that changed them would leave every
earlier run's cache and study behind. The keys of a fixed study, computed by the workflow's own jobs,
against the ones committed in tests/data/item_keys.json.

The study: the demo generator greedy and sampling (2 samples) on the demo questions and on multi-turn
items, graded by the demo judge (reference, generated and logprob verdicts), a pairwise judge and a
judge behind an endpoint. No model runs and no request is sent: every key finds a result made from the
key alone (tests/answer_every_key), so the later turns' and the judges' prompts are the same anywhere.

`python tests/test_item_keys.py --write` writes the file anew, for a change that means to change keys.
"""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import clean_env, new_workflow

pytestmark = pytest.mark.workflow

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "data" / "item_keys.json"
N = 4  # demo questions
MULTI_TURN = [
    {
        "question_id": 81,
        "category": "math",
        "turns": ["What is 2 + 3?", "Now multiply that by 4."],
        "reference": ["5", "20"],
    },
    {"question_id": 82, "category": "writing", "turns": ["What is the capital of France?", "And of Peru?"]},
]


def study(wf) -> Path:
    questions = (wf.path / "config/demo/questions.jsonl").read_text().splitlines()[:N]
    (wf.path / "questions.jsonl").write_text("\n".join(questions) + "\n")
    (wf.path / "mt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MULTI_TURN))
    endpoint = {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "GENJUDGE_TEST_KEY"}
    return wf.write_config(
        "keys.yaml",
        run="keys",
        shards=1,
        generators={"demo": {}, "sampled": {"do_sample": True, "n_samples": 2, "temperature": 0.7, "seed": 3}},
        datasets={
            "questions": {"path": "questions.jsonl"},
            "mt": {
                "path": "mt.jsonl",
                "fields": {"id": "question_id", "prompt": "turns", "reference": "reference", "category": "category"},
            },
        },
        judges={
            "ref": {},
            "logprob": {"verdict": "logprob", "datasets": ["questions"]},
            "pair": {"mode": "pairwise", "baseline": "demo", "template": None, "datasets": ["questions"]},
            "endpoint": {
                "model": "judge-model-2026-01-01",
                "engine": "openai",
                "endpoint": endpoint,
                "template": None,
                "datasets": ["questions"],
            },
        },
    )


def computed_keys(wf) -> dict:
    """{"generate": {generator/dataset/id/sample/turn: key}, "judge": {judge/cell/id/sample/turn/order: key}}"""
    cfg = study(wf)
    results = wf.results("keys")
    targets = [f"results/keys/judge/{j}/raw.parquet" for j in ("ref", "logprob", "pair", "endpoint")]
    env = clean_env(
        PYTHONPATH=f"{HERE / 'answer_every_key'}:{clean_env().get('PYTHONPATH', '')}".rstrip(":"),
        GENJUDGE_TEST_ANSWER_EVERY_KEY="1",
        GENJUDGE_TEST_KEY="unused",
    )
    wf.run(*targets, "--cores", "2", "--configfile", cfg, env=env)
    out: dict = {"generate": {}, "judge": {}}
    for path in sorted((results / "generations").glob("*/*.parquet")):
        g = pd.read_parquet(path)
        for r in g.itertuples():
            out["generate"][f"{path.parent.name}/{path.stem}/{r.id}/s{r.sample}/t{r.turn}"] = r.key
    for judge in ("ref", "logprob", "pair", "endpoint"):
        raw = pd.read_parquet(results / "judge" / judge / "raw.parquet")
        for r in raw.itertuples():
            if not isinstance(r.judge_key, str):  # decided without the judge (no reference): no request
                continue
            cell = f"{r.generator}/{r.dataset}" + (f"-vs-{r.opponent}" if isinstance(r.opponent, str) else "")
            turn, sample = int(r.turn) if r.turn == r.turn else 1, int(r.sample) if r.sample == r.sample else 0
            out["judge"][f"{judge}/{cell}/{r.id}/s{sample}/t{turn}/o{r.order}"] = r.judge_key
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def test_a_fixed_studys_item_keys_are_those_committed(tmp_path, built_models):
    got = computed_keys(new_workflow(tmp_path, built_models))
    expected = json.loads(EXPECTED.read_text())
    assert len(got["generate"]) == (N + 2 * 2) * 3 and len(got["judge"]) == 58  # greedy + 2 samples
    assert all(isinstance(k, str) and len(k) == 64 for part in got.values() for k in part.values())
    for part in ("generate", "judge"):
        changed = sorted(k for k in expected[part].keys() & got[part].keys() if expected[part][k] != got[part][k])
        assert changed == [], f"{len(changed)} {part} keys changed, e.g. {changed[:3]}: earlier caches would miss"
        assert got[part].keys() == expected[part].keys()


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    from conftest import ROOT

    with tempfile.TemporaryDirectory() as d:
        keys = computed_keys(new_workflow(Path(d), ROOT / "models"))
    EXPECTED.write_text(json.dumps(keys, indent=1) + "\n")
    print(f"wrote {EXPECTED}: {len(keys['generate'])} generation and {len(keys['judge'])} judge keys")
