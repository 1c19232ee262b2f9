"""GSM8K- and MATH-style answers through the real snakemake command line: numbers written with each of
LaTeX's separators, per cents, a match only within Math-Verify's tolerance, and a degenerate 1 MB answer
(a generator stuck in a loop until its token limit). The generator and the judge are loopback chat
endpoints that answer fixed texts (no model is loaded), so the run exercises what this module is about:
extraction in the judge job's cascade and in the parse stage, and the report's counts."""

import json
import re

import pandas as pd
import pytest
from conftest import new_workflow
from provider_standin import Provider, Reply, prompt_of, usage

pytestmark = pytest.mark.workflow

GSM = {"reference": "gsm8k", "candidate": "last_number"}
MATH = {"reference": "boxed", "candidate": "boxed"}
LOOP = "So 16 - 3 - 4 = 9 eggs, and 9 * 2 = $18, not $16. "
LONG = LOOP * (2**20 // len(LOOP)) + "So 16 - 3 -"  # cut off mid-sentence: its last number is 3

# id: (category, reference, the generator's answer, decided by, exact match)
ITEMS = {
    "g-thin": ("gsm8k", "#### 2500", r"She pays $2\,500$. The answer is $2\,500$.", "rule", True),
    "g-brace": ("gsm8k", "#### 10000", r"The answer is $10{,}000$.", "rule", True),
    "g-comma": ("gsm8k", "#### 10000", r"The answer is 10,\!000.", "rule", True),
    "g-negative": ("gsm8k", "#### 1234567", r"The answer is $1\!234\!567$.", "rule", True),
    "g-percent": ("gsm8k", "#### 50", r"The answer is $50\%$.", "rule", True),
    "g-space": ("gsm8k", "#### 12000", r"So she has $12\ 000$ left.", "judge", True),  # a fallback: the judge
    "g-joined": ("gsm8k", "#### 1250", r"The answer is $12\,50$.", "judge", False),  # no number
    "g-fragment": ("gsm8k", "#### 0", r"The answer is $10{,}000$.", "judge", False),  # was 000: 0, by rule
    "g-long": ("gsm8k", "#### 18", LONG, "judge", False),
    "m-thin": ("math", r"$\boxed{2500}$", r"So $\boxed{2\,500}$.", "rule", True),
    "m-tuple": ("math", r"$\boxed{(1000, 2)}$", r"So $\boxed{(1\,000, 2)}$.", "rule", True),
    "m-percent": ("math", r"$\boxed{50}$", r"So $\boxed{50%}$.", "rule", True),
    "m-misread": ("math", r"$\boxed{502}$", r"So $\boxed{2\,500}$.", "judge", False),  # was 502, by rule
    "m-zero": ("math", r"$\boxed{0}$", r"So $\boxed{12\,000}$.", "judge", False),  # was 12*0, by rule
    "m-value": ("math", r"$\boxed{0.5}$", r"So $\boxed{50\%}$.", "judge", False),  # was 0.5, by rule
    "m-tolerance": ("math", r"$\boxed{\sqrt{2}}$", r"So $\boxed{1.414214}$.", "judge", True),  # was by rule
}


def stand_in(answers: dict) -> tuple[Provider, list[int]]:
    """A loopback chat completions API without a model (tests/provider_standin.py): a question of ITEMS
    gets its answer (the 1 MB one cut off by the token limit), anything else (a judge prompt)
    `VERDICT: INCORRECT`. The list holds the judge prompts' sizes."""
    judged: list[int] = []

    def answer(body, headers):
        prompt = prompt_of(body)
        text = answers.get(prompt)
        if text is None:
            judged.append(len(prompt))
            text = "VERDICT: INCORRECT"
        tokens = usage(len(prompt) // 4, max(1, len(text) // 4))
        return Reply(content=text, finish="length" if text is LONG else "stop", usage=tokens)

    return Provider(answer), judged


@pytest.fixture(scope="module")
def study(tmp_path_factory, built_models):
    """One run of the workflow over ITEMS: generated, judged with the cascade, parsed and reported."""
    wf = new_workflow(tmp_path_factory.mktemp("answers"), built_models)
    questions = {i: f"Question {i}?" for i in ITEMS}
    rows = [{"id": i, "category": c, "question": questions[i], "answer": ref} for i, (c, ref, *_) in ITEMS.items()]
    (wf.path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    standin, judged = stand_in({questions[i]: answer for i, (_, _, answer, *_) in ITEMS.items()})
    endpoint = {"engine": "openai", "endpoint": {"base_url": standin.url, "check_capabilities": False}}
    rules = [{"categories": ["gsm8k"], **GSM}, {"categories": ["math"], **MATH}]
    cfg = wf.write_config(
        "answers.yaml",
        run="answers",
        shards=1,
        dataset={"path": "answers.jsonl", "answer": {"by_category": rules}},
        generator={"model": "stand-in-generator", **endpoint},
        judge={"model": "stand-in-judge", "template": None, "cascade": True, **endpoint},
    )
    wf.run("--cores", "2", "--configfile", cfg)
    yield wf, judged
    standin.stop()


def test_the_judge_and_parse_jobs_read_every_separator_and_the_long_answer(study):
    wf, judge_prompts = study
    df = pd.read_parquet(wf.results("answers") / "judgments" / "stand-in-judge.parquet").set_index("id")
    assert sorted(df.index) == sorted(ITEMS)
    assert df.loc["g-long", "output"] == LONG and df.loc["g-long", "answer_extracted"] == "3"
    for i, (*_, decided, match) in ITEMS.items():
        assert (df.loc[i, "decided_by"], bool(df.loc[i, "exact_match"])) == (decided, match), i
    assert (
        df.loc["g-brace", "answer_extracted"] == "10{,}000" and df.loc["g-fragment", "answer_extracted"] == "10{,}000"
    )
    assert df.loc["g-joined", "answer_reason"].startswith("no answer extracted: digits grouped in no known way")
    # The judge was asked about the 8 answers the rule did not decide, the 1 MB one among them.
    judged = sorted(i for i, (*_, decided, _) in ITEMS.items() if decided == "judge")
    assert len(judge_prompts) == len(judged) == 8 and max(judge_prompts) > len(LONG)
    assert (df.loc[judged, "verdict"] == "incorrect").all()


def test_the_counts_are_right_and_report_md_and_report_html_agree(study):
    wf, _ = study
    report = wf.results("answers") / "report"
    s = json.loads((report / "summary.json").read_text())
    assert (s["n_items"], s["n_judged"], s["n_unparsed"]) == (16, 16, 0)
    assert s["decided_by"] == {"judge": 8, "rule": 8} and s["accuracy"] == 0.5  # the rule's 8 correct
    assert s["exact_match"]["value"] == 10 / 16
    # The judge's 8 verdicts (all INCORRECT) against exact match: 6 with no match agree, 2 matches do not.
    agreement = s["judge_exact_match_agreement"]
    assert (agreement["value"], agreement["n"]) == (0.75, 8)
    md = (report / "report.md").read_text()
    shown = re.search(r"\| judge agrees with exact match \| (75\.0% \[[^|]*\]) \|", md)
    assert shown and "rule: 8" in md
    html = (report / "report.html").read_text()
    assert f"<td>{shown.group(1)}</td><td>8</td>" in html
