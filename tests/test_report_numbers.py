"""The report's numbers on judgments made up here (no models, no workflow): what n counts,
intervals within [0, 1], truncated answers, unparsed causes, strengths of two generators, paired
differences between generators and the warnings that go with them."""

import numpy as np
import pandas as pd
import pytest

from genjudge.config import defaults
from genjudge.config.experiment import resolve
from genjudge.stages.report import summarise_experiment
from genjudge.stages.report_markdown import render_experiment, render_markdown
from genjudge.store.records import GenerateMeta, JudgeMeta


def judgments(generator, verdicts, dataset="data", samples=1, opponent=None, **columns):
    """One cell's judgments: `verdicts` in item order, `samples` per item."""
    n = len(verdicts)
    df = pd.DataFrame(
        {
            "generator": generator,
            "dataset": dataset,
            "opponent": opponent,
            "id": [f"q{i // samples}" for i in range(n)],
            "sample": [i % samples for i in range(n)],
            "turn": 1,
            "category": "c",
            "prompt": "question",
            "reference": "4",
            "output": "4",
            "exact_match": True,
            "decided_by": "judge",
            "judge_output": "VERDICT: x",
            "p_correct": np.nan,
            "verdict": verdicts,
            "unparsed_reason": [None if v is not None else "no verdict marker" for v in verdicts],
        }
    )
    for k, v in columns.items():
        df[k] = v
    if all(v is None or str(v).replace(".", "").isdigit() for v in verdicts):
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
    return df


def summarise(frames, generators, judge=None, datasets=("data",), dataset=None, **cfg):
    cfg = defaults(
        run="numbers",
        dataset=dataset or {"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in generators},
        datasets={d: {} for d in datasets},
        judge={"model": "j", **(judge or {})},
        **cfg,
    )
    exp = resolve(cfg, check_pairs=False)
    metas = [
        GenerateMeta(generator=g, dataset=d, started_at=0.0, finished_at=1.0) for g in generators for d in datasets
    ]
    judge_metas = {j: JudgeMeta(started_at=0.0, finished_at=1.0) for j in exp.judges}
    frames = frames if isinstance(frames, dict) else {next(iter(exp.judges)): frames}
    frames = {j: pd.concat(f, ignore_index=True) if isinstance(f, list) else f for j, f in frames.items()}
    run, cells = summarise_experiment(exp, cfg, frames, metas, judge_metas)
    md = render_markdown(*next(iter(cells.values()))) if len(cells) == 1 else render_experiment(run, cells, 3)
    return run, cells, md


# --- n counts items; intervals clustered by item and within [0, 1] ----------------------------

C, W = "correct", "incorrect"
# 12 items x 3 samples: 8 items right every time, 3 right twice, 1 never: 30 of 36 answers (83.3%),
# pass@3 11/12.
TWELVE_BY_THREE = [C] * 24 + [C, C, W] * 3 + [W] * 3


def test_the_headline_counts_items_not_samples_and_its_interval_is_clustered_by_item():
    run, cells, md = summarise(judgments("a", TWELVE_BY_THREE, samples=3), ["a"])
    s = run.to_dict()
    assert s["n_items"] == 12 and s["n_answers"] == 36 and s["n_judged"] == 36
    assert s["accuracy"] == pytest.approx(30 / 36)
    acc = s["accuracy_rate"]
    assert acc["n"] == 12 and acc["n_answers"] == 36 and acc["n_effective"] < 36
    # Wilson over the 36 answers as if independent would be [68.1, 92.1]; over items it is wider.
    lo, hi = s["accuracy_ci95"]
    assert lo < 0.681 and hi > 0.921 and lo >= 0 and hi <= 1
    assert s["leaderboard"][0]["accuracy"]["n"] == 12 and s["leaderboard"][0]["n_items"] == 12
    assert "| items | 12 (36 answers: 3 samples per item) |" in md
    assert "n counts items" in md and "clustered by item" in md


def test_rates_over_samples_stay_within_zero_and_one():
    run, _, md = summarise(judgments("a", TWELVE_BY_THREE, samples=3), ["a"])
    samples = run.to_dict()["samples"]
    assert samples["pass_at_k"]["3"]["value"] == pytest.approx(11 / 12)
    assert samples["mean_accuracy"]["value"] == pytest.approx(30 / 36)
    for name, v in [*samples.items(), *((f"pass@{k}", x) for k, x in samples["pass_at_k"].items())]:
        if isinstance(v, dict) and v.get("ci95"):
            assert 0 <= v["ci95"][0] <= v["value"] <= v["ci95"][1] <= 1, (name, v)
    assert "1.0" not in "".join(line for line in md.splitlines() if line.startswith("| pass@"))


def test_mean_score_intervals_stay_within_the_score_range():
    """11 of 12 answers score 10 on a 1-10 scale: the normal interval around 9.75 would reach 10.24,
    where no mean can be; the headline, the category, the turn and the leaderboard stop it at 10."""
    scores = ["10"] * 11 + ["7"]
    run, _, md = summarise(judgments("a", scores), ["a"], judge={"mode": "score"})
    s = run.to_dict()
    m = s["mean_score"]
    assert m["value"] == pytest.approx(9.75) and m["ci95"][1] == 10.0 and 9.0 < m["ci95"][0] < 9.75
    assert s["per_category"]["c"]["mean_score"]["ci95"][1] == 10.0
    assert s["leaderboard"][0]["mean_score"]["ci95"][1] == 10.0
    assert "| mean score (1-10) | 9.75 [" in md and ", 10.00] |" in md
    # Two samples per item: the mean of the items' mean scores stops at 10 as well.
    run, _, _ = summarise(judgments("a", ["10"] * 22 + ["7", "7"], samples=2), ["a"], judge={"mode": "score"})
    over = run.to_dict()["samples"]["mean_score_over_items"]
    assert over["value"] == pytest.approx(9.75) and over["ci95"][1] == 10.0
    # On a 0-100 scale the same scores are far from its end: the interval is the plain one.
    run, _, _ = summarise(judgments("a", scores), ["a"], judge={"mode": "score", "score_range": [0, 100]})
    assert run.to_dict()["mean_score"]["ci95"][1] == pytest.approx(10.24, abs=0.01)


def test_one_answer_per_item_keeps_the_plain_wilson_interval():
    from genjudge.judging.stats import wilson_interval

    run, _, _ = summarise(judgments("a", [C] * 9 + [W] * 3), ["a"])
    s = run.to_dict()
    assert s["n_items"] == s["n_answers"] == 12
    assert s["accuracy_ci95"] == pytest.approx(list(wilson_interval(9, 12)))
    assert "n_effective" not in s["accuracy_rate"]


# --- pairs: all with two generators ---------------------------------------------------------------


def test_pairs_all_with_two_generators_gives_strengths_and_names_the_opponent():
    verdicts = ["win"] * 7 + ["loss"] * 2 + ["tie"] * 3
    df = judgments("a", verdicts, opponent="b", position_consistent=True)
    run, cells, md = summarise(df, ["a", "b"], judge={"mode": "pairwise", "pairs": "all"})
    s = run.to_dict()
    strengths = s["across_cells"]["j"]["bradley_terry"]["data"]
    assert set(strengths) == {"a", "b"} and strengths["a"]["strength"] > strengths["b"]["strength"]
    assert "## Bradley-Terry strengths: data (judge j)" in md
    assert "vs baseline" not in md and "| win share (vs b) | 58.3% [" in md
    assert "| win rate (vs b; ties count half) | 70.8% [" in md  # (7 + 3 / 2) / 12
    assert "| wins / ties / losses (verdicts) | 7 wins, 3 ties, 2 losses |" in md


def test_the_pairwise_headline_is_the_win_rate_with_ties_half_and_ranks_by_it():
    """120 items against a baseline: `tied` won 2, tied 115 and lost 3 (a win share of 1.7%, a win rate of
    49.6%); `mixed` won 60 and lost 60 (50.0%); `good` won 30, tied 80, lost 10 (58.3%). By the win rate
    with ties half, `good` is first and `tied` last, as the field reads them."""
    from genjudge.stages import report_table

    outcomes = {"tied": (2, 115, 3), "mixed": (60, 0, 60), "good": (30, 80, 10)}
    frames = [
        judgments(g, ["win"] * w + ["tie"] * t + ["loss"] * lo, opponent="base", position_consistent=True)
        for g, (w, t, lo) in outcomes.items()
    ]
    run, cells, md = summarise(frames, [*outcomes, "base"], judge={"mode": "pairwise", "baseline": "base"})
    rows = {r["generator"]: r for r in run.leaderboard}
    for g, (w, t, lo) in outcomes.items():
        wr = rows[g]["win_rate"]
        assert wr["value"] == pytest.approx((w + t / 2) / 120)
        assert (wr["wins"], wr["ties"], wr["losses"]) == (w, t, lo)
        assert wr["ci95"][0] <= wr["value"] <= wr["ci95"][1]
    assert list(rows["tied"])[list(rows["tied"]).index("win_rate") - 1] == "truncated_rate"  # the first measure
    exp = resolve(
        defaults(
            run="numbers",
            dataset={"path": "data.jsonl"},
            generator={"model": "g"},
            generators={g: {} for g in [*outcomes, "base"]},
            datasets={"data": {}},
            judge={"model": "j", "mode": "pairwise", "baseline": "base"},
        ),
        check_pairs=False,
    )
    t = report_table.build(exp, run.leaderboard, run.across_cells, [])
    (col,) = t["columns"]
    assert (col["measure"], col["kind"]) == ("win_rate", "rate")
    ranks = {r["generator"]: r["values"][col["key"]]["rank"] for r in t["rows"]}
    assert ranks == {"good": 1.0, "mixed": 2.0, "tied": 3.0, "base": None}
    lines = report_table.markdown(t)
    assert "data · j (win rate)" in lines[0]
    tied = next(line for line in lines if line.startswith("| tied |"))
    assert "49.6% [" in tied and "(W/T/L 2/115/3) (3" in tied
    ub = {r["generator"]: r["values"][col["key"]]["rank_ub"] for r in t["rows"]}
    # Ranked by interval only where one lies wholly above another (FastChat's leaderboard rank).
    ci = {r["generator"]: r["values"][col["key"]]["ci95"] for r in t["rows"] if r["generator"] != "base"}
    assert ub == {g: 1 + sum(ci[o][0] > ci[g][1] for o in ci if o != g) for g in ci} | {"base": None}
    assert ("; " in tied) == (ub["tied"] != 3)


# --- truncated answers ----------------------------------------------------------------------------


def test_truncated_answers_are_counted_per_cell_in_the_headline_and_the_leaderboard_with_examples():
    finish = ["length"] * 3 + ["stop"] * 9
    outputs = [f"Step {i}: so far we have computed the cost as 12 times" for i in range(3)] + ["4"] * 9
    a = judgments("a", [C] * 6 + [W] * 6, finish_reason=finish, output=outputs)
    b = judgments("b", [C] * 12, finish_reason="stop")
    run, cells, md = summarise([a, b], ["a", "b"])
    s = run.to_dict()
    rows = {r["generator"]: r for r in s["leaderboard"]}
    assert (rows["a"]["n_truncated"], rows["a"]["truncated_rate"]) == (3, 0.25)
    assert (rows["b"]["n_truncated"], rows["b"]["truncated_rate"]) == (0, 0.0)
    assert s["n_truncated"] == 3 and s["truncated_rate"] == pytest.approx(3 / 24)
    cell = s["cells"]["a/data"]
    assert cell["n_truncated"] == 3 and [e["id"] for e in cell["truncated_examples"]] == ["q0", "q1", "q2"]
    assert cell["truncated_examples"][0]["output_end"].endswith("cost as 12 times")
    assert "| a | data | j | " in md and "| 3 (25.0%) |" in md  # the leaderboard's truncated column
    assert "| truncated answers (reached generator.max_new_tokens) | 3 (25.0%) |" in md
    assert "### Truncated answers" in md and "cost as 12 times" in md


# --- unparsed verdicts by cause -------------------------------------------------------------------


def test_unparsed_verdicts_are_counted_by_cause_with_the_text_ends_as_examples():
    cause = r"no match for the verdict pattern RESULT:\s*(CORRECT|INCORRECT)"
    df = judgments("a", [None] * 4 + [C] * 8)
    df.loc[:3, "unparsed_reason"] = [
        cause,
        cause,
        # as judgments parsed before causes and text ends were apart held them
        f"{cause}; the text ends: ...so it is INCORRECT",
        "no verdict marker",
    ]
    df["unparsed_detail"] = ["the text ends: ...INCORRECT", "the text ends: ...VERDICT", None] + [None] * 9
    run, cells, md = summarise(df, ["a"])
    s = run.to_dict()
    assert s["unparsed_reasons"] == {cause: 3, "no verdict marker": 1}
    examples = s["unparsed_examples"][cause]
    assert [e["detail"] for e in examples] == [
        "the text ends: ...INCORRECT",
        "the text ends: ...VERDICT",
        "the text ends: ...so it is INCORRECT",
    ]
    assert [e["id"] for e in examples] == ["q0", "q1", "q2"]
    assert "| no verdict marker | 1 |" in md and "the text ends: ...VERDICT" in md


# --- paired differences between generators ----------------------------------------------------------


def test_two_generators_on_the_same_items_get_a_paired_difference_and_mcnemars_test():
    from scipy.stats import binomtest

    # 30 items: a right on 24, b right on 15; a right where b is wrong on 11 items, b right where a is wrong on 2.
    a = [C] * 13 + [C] * 11 + [W] * 2 + [W] * 4
    b = [C] * 13 + [W] * 11 + [C] * 2 + [W] * 4
    run, _, md = summarise([judgments("a", a), judgments("b", b)], ["a", "b"])
    (p,) = run.to_dict()["paired"]
    assert (p["judge"], p["dataset"], p["a"], p["b"], p["measure"]) == ("j", "data", "a", "b", "accuracy")
    assert p["difference"] == pytest.approx(24 / 30 - 15 / 30) and p["n_items"] == 30
    lo, hi = p["ci95"]
    assert lo < p["difference"] < hi and lo > 0  # a is better, and the interval says so
    assert p["test"] == "McNemar exact" and (p["a_only"], p["b_only"]) == (11, 2)
    assert p["p_value"] == pytest.approx(binomtest(11, 13, 0.5).pvalue)
    assert "## Paired differences" in md and "| j | data | a - b | accuracy | +30.0 pp [" in md


def test_an_interval_and_a_test_that_disagree_say_which_to_read():
    """115 items, 1 only a got right and 7 only b: -5.2 pp with a bootstrap interval that excludes 0, and
    McNemar's exact p = 0.0703. The row says so, and to read the test; a pair that agrees says nothing."""
    a = [C] * 1 + [W] * 7 + [C] * 20 + [W] * 87
    b = [W] * 1 + [C] * 7 + [C] * 20 + [W] * 87
    run, _, md = summarise([judgments("a", a), judgments("b", b)], ["a", "b"])
    (p,) = run.to_dict()["paired"]
    assert p["difference"] == pytest.approx(-6 / 115) and p["p_value"] == pytest.approx(0.0703, abs=1e-4)
    assert p["ci95"][1] < 0
    assert p["disagreement"].startswith(
        "the interval excludes 0 but p is not below 0.05: read the test. Only 8 discordant items tell the two apart"
    )
    assert "only b); the interval excludes 0 but p is not below 0.05: read the test." in md
    agree, _, _ = summarise([judgments("a", [C] * 24 + [W] * 6), judgments("b", [C] * 12 + [W] * 18)], ["a", "b"])
    assert "disagreement" not in agree.to_dict()["paired"][0]


def test_scores_with_samples_are_paired_by_item_and_tested_with_wilcoxon():
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(1)
    sa = rng.integers(4, 11, 40)  # 20 items x 2 samples
    sb = np.clip(sa - rng.integers(0, 3, 40), 1, 10)
    fa = judgments("a", [f"{x}" for x in sa], samples=2)
    fb = judgments("b", [f"{x}" for x in sb], samples=2)
    run, _, md = summarise([fa, fb], ["a", "b"], judge={"mode": "score"})
    (p,) = run.to_dict()["paired"]
    assert p["measure"] == "mean_score" and p["n_items"] == 20 and p["test"] == "Wilcoxon signed-rank"
    assert p["difference"] == pytest.approx(sa.mean() - sb.mean())
    per_item = sa.reshape(20, 2).mean(axis=1) - sb.reshape(20, 2).mean(axis=1)
    assert p["p_value"] == pytest.approx(wilcoxon(per_item).pvalue)
    assert p["ci95"][0] <= p["difference"] <= p["ci95"][1]
    assert "| j | data | a - b | mean_score | +" in md


def test_verdicts_with_several_answers_per_item_are_tested_over_items():
    a = judgments("a", TWELVE_BY_THREE, samples=3)
    b = judgments("b", [C, W, W] * 12, samples=3)
    run, _, _ = summarise([a, b], ["a", "b"])
    (p,) = run.to_dict()["paired"]
    assert p["n_items"] == 12 and p["test"] == "Wilcoxon signed-rank over items' accuracies"
    assert p["difference"] == pytest.approx(30 / 36 - 12 / 36)


# --- headlines that fit the mode ----------------------------------------------------------------------

LONG = "A good answer explains that the tides come from the moon's pull on the oceans and the earth's turn."


def test_exact_match_of_open_ended_answers_against_long_references_is_not_a_headline():
    df = judgments("a", ["7", "8", "6", "9"], reference=LONG, exact_match=False)
    run, _, md = summarise(df, ["a"], judge={"mode": "score"})
    s = run.to_dict()
    assert s["exact_match_shown"] is False and "not short answers" in s["exact_match_note"]
    assert "| normalised exact match | 0.0%" not in md
    assert "| normalised exact match | not shown: the references are not short answers" in md
    assert s["exact_match"]["value"] == 0.0  # still there for machines
    assert s["leaderboard"][0]["exact_match_shown"] is False


@pytest.mark.parametrize(
    "reference,answer,shown",
    [("Lima", {}, True), (LONG, {"reference": "last_number", "candidate": "last_number"}, True)],
)
def test_exact_match_is_shown_for_short_references_or_where_an_answer_is_extracted(reference, answer, shown):
    df = judgments("a", ["7", "8", "6", "9"], reference=reference)
    run, _, md = summarise(df, ["a"], judge={"mode": "score"}, dataset={"path": "data.jsonl", "answer": answer})
    assert run.to_dict()["exact_match_shown"] is shown and "| normalised exact match | 100.0% [" in md


# --- report.md shows text, never markup ---------------------------------------------------------


def test_html_in_outputs_datasets_and_errors_is_text_in_report_md():
    script = "<script>alert(1)</script>"
    frame = '<iframe src="javascript:alert(2)"></iframe>'
    a = judgments(
        "a",
        [C, W, None],
        output=[script, "fine", "x"],
        reference=[frame, "4", "4"],
        prompt=["<img src=x onerror=alert(3)>", "q", "q"],
        category=["<b>bold</b>", "c", "c"],
        finish_reason=["length", "stop", "stop"],
        judge_output=[script, "VERDICT: x", "<style>p{}</style>"],
    )
    a.loc[2, "unparsed_reason"] = "no match for <VERDICT>"
    b = judgments("b", [C, C, C], id=["<q0>", "q1", "q2"])
    for md in (summarise(a, ["a"])[2], summarise([a, b], ["a", "b"])[2]):
        for tag in ("<script", "<iframe", "<img", "<b>", "<style", "<VERDICT>", "<q0>"):
            assert tag not in md, tag
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and '&lt;iframe src="javascript:' in md
        assert "| &lt;b&gt;bold&lt;/b&gt; |" in md and "no match for &lt;VERDICT&gt;" in md


# --- judges that parse little or nothing -----------------------------------------------------------


def test_a_cell_with_no_parsed_verdict_fails_and_one_over_a_fifth_unparsed_is_warned_of():
    from genjudge.stages.report import summary_of

    cfg = defaults(
        run="numbers",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={"a": {}, "b": {}, "c": {}},
        datasets={"data": {}},
        judge={"model": "j"},
    )
    a = judgments("a", [C] * 9 + [None] * 3)  # 25% unparsed: a warning
    b = judgments("b", [None] * 12, judge_output="VERDICT: maybe")  # none parsed: a failed cell
    b.loc[0, "unparsed_reason"] = "no verdict marker"
    b.loc[1:, "unparsed_reason"] = "VERDICT marker without a recognised label"
    c = judgments("c", [C] * 11 + [None])  # 1 in 12: no warning
    metas = [GenerateMeta(generator=g, dataset="data", started_at=0.0, finished_at=1.0) for g in "abc"]
    run, cells, study = summary_of(
        cfg, {"j": pd.concat([a, b, c], ignore_index=True)}, metas, {"j": JudgeMeta(started_at=0.0, finished_at=1.0)}
    )
    (failed,) = run.failed_cells
    assert (failed["generator"], failed["stage"]) == ("b", "parse")
    (e,) = failed["errors"]
    assert e["type"] == "NoVerdictParsed" and e["log"] == "logs/numbers/parse_verdicts/j.log"
    assert e["message"].startswith(
        "none of the 12 verdicts of judge 'j' parsed; most common cause: VERDICT marker without a recognised label "
        "(11 of 12); item 'q1''s raw judge output: 'VERDICT: maybe'"
    )
    (w,) = run.warnings
    assert w == (
        "a/data (judge j): 3 of 12 verdicts (25.0%) were not parsed, most often: no verdict marker (3); the measures "
        "are over the 9 answers with a verdict only."
    )
    values = {r["generator"]: r["values"]["data/j"] for r in run.table["rows"]}
    assert values["b"]["status"] == "failed" and values["a"]["status"] == "ok"
    md = study.markdown("# Report\n\n## Leaderboard\n")
    lines = md.splitlines()
    assert lines.index(f"> **Warning:** {w}") < lines.index("## Models × benchmarks") < lines.index("## Failed cells")
    assert "| b/data | j | parse j | NoVerdictParsed: none of the 12 verdicts" in md


def _one_cell_summary(df, report=None, judge=None, generators=("a",), study=False):
    """summary_of on one judge's judgments (the checks of what the judge parsed with it): the run's
    summary, and with `study` its report.md too."""
    from genjudge.stages.report import summary_of

    cfg = defaults(
        run="numbers",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in generators},
        datasets={"data": {}},
        judge={"model": "j", **(judge or {})},
        **({"report": report} if report else {}),
    )
    metas = [GenerateMeta(generator=g, dataset="data", started_at=0.0, finished_at=1.0) for g in generators]
    run, _, st = summary_of(cfg, {"j": df}, metas, {"j": JudgeMeta(started_at=0.0, finished_at=1.0)})
    return (run, st.markdown("# Report\n")) if study else run


def test_a_judge_that_parses_none_of_its_own_fails_the_cell_though_rules_gave_verdicts():
    """The cascade decided 8 answers; the judge, asked about the other 4, parsed none: the cell fails."""
    df = judgments("a", [C] * 8 + [None] * 4, judge_output=[None] * 8 + ["I think so"] * 4)
    df.loc[:7, "decided_by"] = "rule"
    run = _one_cell_summary(df)
    (failed,) = run.failed_cells
    assert failed["stage"] == "parse"
    (e,) = failed["errors"]
    assert e["type"] == "NoVerdictParsed"
    assert e["message"].startswith(
        "none of the 4 verdicts of judge 'j' parsed (the other 8 verdicts came from rules or "
        "report.unfinished_reasoning, not the judge); most common cause: no verdict marker (4 of 4); "
        "item 'q8''s raw judge output: 'I think so'"
    )
    values = run.table["rows"][0]["values"]["data/j"]
    assert values["status"] == "failed"


def test_a_judge_that_parses_none_fails_the_cell_though_unfinished_traces_are_counted_incorrect():
    df = judgments("a", [None] * 6)
    df.loc[:2, "decided_by"] = "reasoning not finished"
    df.loc[:2, "judge_output"] = None
    run = _one_cell_summary(df, {"unfinished_reasoning": "incorrect"})
    assert run.n_judged == 3  # the three unfinished traces, counted incorrect
    (failed,) = run.failed_cells
    assert failed["errors"][0]["message"].startswith("none of the 3 verdicts of judge 'j' parsed (the other 3 ")


def test_the_unparsed_warning_is_over_the_judges_own_verdicts_not_the_rules():
    """20 answers decided by rules, 4 asked of the judge, 2 of them unparsed: 2 of 24 overall (8%) hid
    that half of what the judge said could not be read."""
    df = judgments("a", [C] * 22 + [None] * 2)
    df.loc[:19, "decided_by"] = "rule"
    run = _one_cell_summary(df)
    assert not run.failed_cells
    (w,) = run.warnings
    assert w == (
        "a/data (judge j): 2 of 4 verdicts (50.0%) were not parsed, most often: no verdict marker (2); the "
        "measures are over the 22 answers with a verdict only (20 of them decided by rules or "
        "report.unfinished_reasoning)."
    )


def test_a_judge_whose_verdicts_flip_with_the_order_is_warned_of_and_its_own_ties_told_apart():
    """12 pairs: 7 verdicts flipped with the answers' order (counted as ties), 1 tie both ways, 4 wins
    both ways: consistency 5 of 12, under a half: a warning that says 8 ties, 1 the judge's own. With 6
    flips of 12, a half, no warning."""

    def pairs(ties, flipped):
        flips = (["win", "loss"] * flipped)[:flipped]
        return judgments(
            "a",
            ["win"] * 4 + ["tie"] * (ties + flipped),
            opponent="base",
            position_consistent=[True] * (4 + ties) + [False] * flipped,
            outcome_order0=["win"] * 4 + ["tie"] * ties + flips,
            outcome_order1=["win"] * 4 + ["tie"] * ties + [{"win": "loss", "loss": "win"}[o] for o in flips],
        )

    pairwise = {"mode": "pairwise", "baseline": "base"}
    run, md = _one_cell_summary(pairs(1, 7), judge=pairwise, generators=("a", "base"), study=True)
    (w,) = run.warnings
    assert w == (
        "a/data vs base (judge j): the verdict changed with the answers' order in 7 of 12 pairs (position "
        "consistency 41.7%); each such pair counts as a tie, as FastChat counts it, so of the 8 ties only 1 were "
        "the judge's own, and the win rate is drawn toward 50% by the judge's position bias."
    )
    assert f"> **Warning:** {w}" in md
    assert not _one_cell_summary(pairs(2, 6), judge=pairwise, generators=("a", "base")).warnings


def test_partial_verdicts_are_counted_where_the_accuracy_leaves_them_out():
    """6 correct, 4 partial, 2 incorrect: accuracy 50.0%, and a row says how many were PARTIAL."""
    run, _, md = summarise(judgments("a", [C] * 6 + ["partial"] * 4 + [W] * 2), ["a"])
    assert run.accuracy == pytest.approx(0.5)
    assert "| verdicts (PARTIAL counts as not correct) | correct 6, partial 4, incorrect 2 |" in md
    _, _, md = summarise(judgments("a", [C] * 6 + [W] * 6), ["a"])
    assert "PARTIAL counts" not in md


def test_strengths_fitted_without_a_failed_pair_say_so():
    """pairs: all over three generators; the judge parsed none of one pair's verdicts: that cell fails,
    the table marks the strength column failed, and the strengths' section says which games it lacks."""
    from genjudge.stages.report import summary_of

    cfg = defaults(
        run="numbers",
        dataset={"path": "data.jsonl"},
        generator={"model": "g"},
        generators={g: {} for g in "abc"},
        datasets={"data": {}},
        judge={"model": "j", "mode": "pairwise", "pairs": "all"},
    )
    cells = resolve(cfg).cells("j")
    frames = []
    for i, cell in enumerate(cells):
        verdicts = [None] * 12 if i == 0 else ["win"] * 7 + ["loss"] * 5
        df = judgments(cell.generator, verdicts, opponent=cell.opponent, position_consistent=None if i == 0 else True)
        df["outcome_order0"] = df["outcome_order1"] = verdicts
        frames.append(df)
    metas = [GenerateMeta(generator=g, dataset="data", started_at=0.0, finished_at=1.0) for g in "abc"]
    run, by_cell, _ = summary_of(
        cfg, {"j": pd.concat(frames, ignore_index=True)}, metas, {"j": JudgeMeta(started_at=0.0, finished_at=1.0)}
    )
    (failed,) = run.failed_cells
    lost = f"{cells[0].generator} vs {cells[0].opponent}"
    assert (failed["generator"], failed["opponent"], failed["stage"]) == (
        cells[0].generator,
        cells[0].opponent,
        "parse",
    )
    md = render_experiment(run, by_cell, 3)
    assert f"> **Warning:** fitted without the games of the failed cell(s) {lost} (see Failed cells)" in md
    assert md.index("fitted without") > md.index("Bradley-Terry strengths: data (judge j)")


def test_counts_say_what_they_count_items_once_verdicts_over_cells():
    """Two generators on one dataset of 12 items, 3 samples each: 12 items (not 24), 2 cells, 72 verdicts."""
    run, _, md = summarise([judgments(g, TWELVE_BY_THREE, samples=3) for g in ("a", "b")], ["a", "b"])
    assert (run.n_items, run.n_cells, run.n_answers) == (12, 2, 72)
    assert "12 items (the datasets' questions) · 2 cells (a generator's answers on a dataset by a judge) · 72 " in md
    head = next(line for line in md.splitlines() if line.startswith("| generator |"))
    assert "| items | answers | unparsed answers | truncated answers |" in head and "| n |" not in head


def test_the_throughput_table_shows_set_up_apart_from_load():
    a = judgments("a", [C] * 4)
    run, cells, md = summarise(a, ["a"])
    from genjudge.stages.report import _shard_rows

    s = next(iter(cells.values()))[0]
    meta = GenerateMeta(generator="a", dataset="data", started_at=0.0, finished_at=20.0)
    meta.setup_seconds, meta.load_seconds = 12.5, 2.0
    s.shards = _shard_rows([meta])
    text = render_markdown(s, a)
    assert "| shard | answers | GPUs | host | set-up s | load s | generate s |" in text
    assert "| 12.5 | 2.0 |" in text
