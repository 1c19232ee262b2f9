from genjudge.judging import modes
from genjudge.judging.verdicts import parse_verdict as _parse

REF = modes.get("reference")
DEFAULT_PATTERN = REF.pattern


def parse_verdict(text, pattern=REF.pattern, labels=None, marker="VERDICT"):
    return _parse(text, pattern, REF.labels if labels is None else labels, marker)


def test_last_verdict_marker_wins_over_reasoning():
    text = (
        "The candidate says 12. If it had said 13 I would write VERDICT: INCORRECT, "
        "but 12 matches the reference.\nVERDICT: CORRECT"
    )
    v = parse_verdict(text)
    assert v.verdict == "correct" and v.reason is None and v.n_markers == 2


def test_other_label_mentioned_without_marker_does_not_count():
    v = parse_verdict("This is not incorrect at all; the answer is right.\nVERDICT: CORRECT")
    assert v.verdict == "correct"
    v = parse_verdict("Correct answer would be 5; the candidate said 6.\nVERDICT: INCORRECT")
    assert v.verdict == "incorrect"


def test_no_verdict_is_unparsed_with_reason_never_incorrect():
    v = parse_verdict("The answer seems wrong to me.")
    assert v.verdict is None and v.reason == "no verdict marker"
    v = parse_verdict("")
    assert v.verdict is None and v.reason == "empty judge output"
    v = parse_verdict("VERDICT: MAYBE")
    assert v.verdict is None and "without a recognised label" in v.reason


def test_several_verdicts_take_the_last():
    v = parse_verdict("VERDICT: CORRECT\nOn reflection...\nVERDICT: INCORRECT")
    assert v.verdict == "incorrect" and v.n_markers == 2


def test_markdown_bold_and_word_boundary():
    assert parse_verdict("VERDICT: **CORRECT**").verdict == "correct"
    assert parse_verdict("VERDICT: CORRECTLY").verdict is None


def test_custom_pattern_replaces_the_default_one():
    text = "VERDICT: CORRECT ... on reflection, final grade: [[B]]"
    assert parse_verdict(text).verdict == "correct"  # the default pattern reads the VERDICT line
    v = parse_verdict(text, pattern=r"\[\[(A|B)\]\]", labels={"A": "correct", "B": "incorrect"})
    assert v.verdict == "incorrect" and v.n_markers == 1
    # A custom pattern that does not match says so, not "no verdict marker".
    v = parse_verdict("VERDICT: CORRECT", pattern=r"\[\[(A|B)\]\]", labels={"A": "a"}, marker=None)
    assert v.verdict is None
    assert v.reason == "no match for the verdict pattern \\[\\[(A|B)\\]\\]"
    assert v.detail == "the text ends: ...VERDICT: CORRECT"


def test_score_and_pairwise_patterns_take_the_last_marker():
    def parts(name):
        m = modes.get(name)
        return m.pattern, m.labels, m.marker

    score = modes.get("score")
    rx = score.compile(None)
    assert score.parse_text("SCORE: 3 ... no, SCORE: 10", rx, False).verdict == "10"
    v = score.parse_text("SCORE: 11", rx, False)
    assert v.verdict is None and (v.reason, v.detail) == ("score outside 1-10", "score 11")
    assert score.parse_text("SCORE: [[7.5]]", rx, False).verdict == "7.5"
    assert score.parse_text("SCORE: 37", rx, False, {"score_range": [0, 100]}).verdict == "37"
    fastchat = score.compile(r"\[\[(\d+\.?\d*)\]\]")
    assert score.parse_text("Rating: [[5.5]]", fastchat, True).verdict == "5.5"
    pattern, labels, marker = parts("pairwise")
    assert parse_verdict("A is longer but VERDICT: B", pattern, labels, marker).verdict == "b"
    assert parse_verdict("VERDICT: [[A]]", pattern, labels, marker).verdict == "a"
    assert parse_verdict("VERDICT: TIE", pattern, labels, marker).verdict == "tie"
    assert parse_verdict("VERDICT: Answer A", pattern, labels, marker).reason.startswith("VERDICT marker")
