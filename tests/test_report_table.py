"""The models x benchmarks table: one row per generator, one column per (dataset, judge)."""

from genjudge import config as wfconfig
from genjudge.config.experiment import resolve
from genjudge.report_html import plots
from genjudge.stages import report_table


def study():
    return resolve(
        wfconfig.validate(
            {
                "run": "t",
                "dataset": {"path": "config/demo/questions.jsonl"},
                "generator": {"model": "models/demo-generator"},
                "judge": {"model": "models/demo-judge"},
                "generators": {"a": {}, "b": {}, "c": {}},
                "datasets": {"gsm8k": {}, "mtbench": {}},
                "judges": {
                    "ref": {"datasets": ["gsm8k"]},
                    "score": {"mode": "score", "datasets": ["mtbench"], "generators": ["a", "b"]},
                    "vs_a": {"mode": "pairwise", "baseline": "a", "datasets": ["mtbench"]},
                    "all": {"mode": "pairwise", "pairs": "all", "datasets": ["gsm8k"]},
                },
            }
        )
    )


def rate(value, n=10):
    return {"value": value, "ci95": [value - 0.1, value + 0.1], "n": n}


def row(g, d, j, mode, **measures):
    return {"generator": g, "dataset": d, "judge": j, "opponent": None, "mode": mode, "n_judged": 10, **measures}


LEADERBOARD = [
    row("a", "gsm8k", "ref", "reference", accuracy=rate(0.5)),
    row("b", "gsm8k", "ref", "reference", accuracy=rate(0.9)),
    row("c", "gsm8k", "ref", "reference", accuracy=rate(0.5)),
    row("a", "mtbench", "score", "score", mean_score={"value": 6.0, "ci95": [5.5, 6.5], "kind": "mean", "n": 8}),
    {
        **row("b", "mtbench", "vs_a", "pairwise", win_rate={**rate(0.7), "wins": 6, "ties": 2, "losses": 2}),
        "opponent": "a",
    },
    {
        **row("c", "mtbench", "vs_a", "pairwise", win_rate={**rate(0.2), "wins": 1, "ties": 2, "losses": 7}),
        "opponent": "a",
    },
]
STRENGTHS = {
    "all": {
        "bradley_terry": {
            "gsm8k": {g: {"strength": s, "ci95": [s - 1, s + 1]} for g, s in zip("abc", (0.5, -0.2, -0.3))}
        }
    }
}
FAILED = [
    {"judge": "score", "generator": "b", "dataset": "mtbench", "opponent": None, "stage": "generate", "errors": []}
]


def test_columns_follow_the_judges_and_each_holds_its_mode_headline():
    t = report_table.build(study(), LEADERBOARD, STRENGTHS, FAILED)
    cols = {c["key"]: (c["measure"], c["kind"]) for c in t["columns"]}
    assert cols == {
        "gsm8k/ref": ("accuracy", "rate"),
        "gsm8k/all": ("strength", "strength"),
        "mtbench/score": ("mean_score", "mean"),
        "mtbench/vs_a": ("win_rate", "rate"),
    }
    v = {r["generator"]: r["values"] for r in t["rows"]}
    assert v["b"]["mtbench/score"]["status"] == "failed" and v["c"]["mtbench/score"]["status"] == "not graded"
    assert v["a"]["mtbench/vs_a"]["status"] == "baseline" and v["b"]["mtbench/vs_a"]["value"] == 0.7
    assert v["c"]["gsm8k/all"]["value"] == -0.3 and v["a"]["gsm8k/all"]["ci95"] == [-0.5, 1.5]
    # ranks within a column, 1 = best, ties share the mean rank
    assert [v[g]["gsm8k/ref"]["rank"] for g in "abc"] == [2.5, 1.0, 2.5]
    assert [v[g]["gsm8k/all"]["rank"] for g in "abc"] == [1.0, 2.0, 3.0]
    # a is alone in mtbench/score (b failed, c is not graded): nobody to rank it against there
    assert v["a"]["mtbench/score"]["rank"] is None and v["b"]["mtbench/score"]["rank"] is None
    mean = {r["generator"]: (r["mean_rank"], r["n_ranked"]) for r in t["rows"]}
    assert mean == {"a": (1.75, 2), "b": (1.333, 3), "c": (2.5, 3)}  # rounded to 3 places
    assert [r["generator"] for r in t["rows"]] == ["b", "a", "c"]  # by mean rank
    # a's mean rank is over 2 columns, b's and c's over 3: the table says they do not compare
    assert t["mean_rank_warning"].startswith(
        "the mean ranks are over different numbers of columns (b over 3 columns, a over 2 columns, c over 3 columns)"
    )
    md = report_table.with_sections("# R\n\n## Leaderboard", t, [])
    assert "> **Warning:** the mean ranks are over different numbers of columns" in md
    assert any(line.startswith("warning: the mean ranks") for line in report_table.summary_lines(t, []))


def test_markdown_and_heat_map_show_values_intervals_ranks_and_failures():
    t = report_table.build(study(), LEADERBOARD, STRENGTHS, FAILED)
    lines = report_table.markdown(t)
    assert lines[0] == (
        "| generator | gsm8k · ref (accuracy) | gsm8k · all (strength) | mtbench · score (mean score) | "
        "mtbench · vs_a (win rate) | mean rank |"
    )
    b = next(line for line in lines if line.startswith("| b |"))
    # The strengths' intervals overlap: by intervals every generator ranks 1 there (Chatbot Arena's rank);
    # b's accuracy interval lies wholly above a's and c's, which share rank 2 by intervals.
    assert (
        b == "| b | 90.0% [80.0, 100.0] (1) | -0.20 [-1.20, +0.80] (2; 1 by intervals) | failed | 70.0% [60.0, 80.0] "
        "(W/T/L 6/2/2) (1) | 1.33 (3 columns) |"
    )
    a_line = next(line for line in lines if line.startswith("| a |"))
    assert "50.0% [40.0, 60.0] (2.5; 2 by intervals)" in a_line and "+0.50 [-0.50, +1.50] (1)" in a_line
    by = {r["generator"]: {k: v["rank_ub"] for k, v in r["values"].items()} for r in t["rows"]}
    assert by["b"]["gsm8k/ref"] == 1 and by["a"]["gsm8k/ref"] == by["c"]["gsm8k/ref"] == 2
    assert {by[g]["gsm8k/all"] for g in "abc"} == {1}
    assert "| a | " in lines[3] and "| baseline |" in lines[3]
    assert plots.models_by_benchmarks(t) is not None
    assert plots.models_by_benchmarks({"columns": [], "rows": []}) is None


def test_a_report_gets_the_table_and_the_failed_cells_before_its_sections():
    t = report_table.build(study(), LEADERBOARD, STRENGTHS, FAILED)
    failed = [
        {
            **FAILED[0],
            "errors": [
                {
                    "generator": "b",
                    "dataset": "mtbench",
                    "shard": 1,
                    "type": "InputError",
                    "message": "item 'x': too long | really",
                    "log": "logs/t/generate/b/mtbench/1.log",
                }
            ],
        }
    ]
    text = report_table.with_sections("# Report\n\n## Leaderboard\n\nrows", t, failed)
    lines = text.splitlines()
    assert lines.index("## Models × benchmarks") < lines.index("## Failed cells") < lines.index("## Leaderboard")
    assert (
        "| b/mtbench | score | generate b/mtbench/1 | InputError: item 'x': too long \\| really | "
        "logs/t/generate/b/mtbench/1.log |"
    ) in lines
    printed = report_table.summary_lines(t, failed)
    assert printed[-2].startswith("FAILED b/mtbench (judge score, generate): InputError: item 'x'")
    # one generator in one column compares nothing: no table, the failures still
    one = {"columns": t["columns"][:1], "rows": t["rows"][:1]}
    assert "## Models × benchmarks" not in report_table.with_sections("# R\n\n## Headline", one, failed)


def test_a_generator_alone_in_a_column_gets_no_rank_there():
    """demo_study without `lenient`, and two judges grading only `plain`: plain is last in the one
    column that compares it, so its mean rank is 3, not (3 + 1 + 1) / 3."""
    cfg = wfconfig.validate(
        {
            "run": "t",
            "dataset": {"path": "config/demo/questions.jsonl"},
            "generator": {"model": "models/demo-generator"},
            "judge": {"model": "models/demo-judge"},
            "generators": {"demo": {}, "terse": {"max_new_tokens": 2}, "plain": {"use_chat_template": False}},
            "judges": {"demo": {}, "j2": {"generators": ["plain"]}, "j3": {"generators": ["plain"]}},
        }
    )
    exp = resolve(cfg)
    board = [
        row("demo", "questions", "demo", "reference", accuracy=rate(0.75)),
        row("terse", "questions", "demo", "reference", accuracy=rate(0.659)),
        row("plain", "questions", "demo", "reference", accuracy=rate(0.205)),
        row("plain", "questions", "j2", "reference", accuracy=rate(0.3)),
        row("plain", "questions", "j3", "reference", accuracy=rate(0.4)),
    ]
    t = report_table.build(exp, board, {}, [])
    v = {r["generator"]: r["values"] for r in t["rows"]}
    assert v["plain"]["questions/j2"]["value"] == 0.3 and v["plain"]["questions/j2"]["rank"] is None
    assert v["plain"]["questions/j3"]["rank"] is None and v["plain"]["questions/demo"]["rank"] == 3.0
    mean = {r["generator"]: (r["mean_rank"], r["n_ranked"]) for r in t["rows"]}
    assert mean == {"demo": (1.0, 1), "terse": (2.0, 1), "plain": (3.0, 1)}
    assert [r["generator"] for r in t["rows"]] == ["demo", "terse", "plain"]
    plain = next(line for line in report_table.markdown(t) if line.startswith("| plain |"))
    assert plain.endswith("| 30.0% [20.0, 40.0] | 40.0% [30.0, 50.0] | 3.00 (1 column) |"), plain
