"""Mathematical answers compared by Math-Verify, choices the reply rejects or takes back, numbers never
read as fragments, and a cascade that decides only what is certain (strict extractions).

Every case below was wrong before Math-Verify compared `boxed` and numeric answers: a formula compared
as text treated `+ - ^ _ ( ) [ ]` as word breaks, `choice` read rejected letters, `last_number`
returned fragments, and the cascade counted every such match correct without the judge.
"""

import pandas as pd
import pytest

from genjudge.config.specs import spec_for
from genjudge.judging import modes
from genjudge.judging.extraction import (
    BOXED,
    LAST_NUMBER,
    MARKER,
    STATED,
    WHOLE_TEXT,
    Extracted,
    check_answer,
    extract,
    parse_number,
)
from genjudge.judging.verdicts import compile_pattern

BOXED_BOTH = {"reference": "boxed", "candidate": "boxed"}
TEMPLATE = "Question: {question}\nReference: {reference}\nAnswer: {candidate}\nVERDICT:"
CASCADE_SPEC = spec_for("judge", model="m", cascade=True)  # frozen: built once (the schema's defaults cost)


def cascade(rows: list[tuple[str, str]], answer: dict | None) -> list[str]:
    """decided_by of each (output, reference) under `cascade: true`."""
    gens = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(len(rows))],
            "prompt": ["?"] * len(rows),
            "output": [o for o, _ in rows],
            "reference": [r for _, r in rows],
        }
    )
    return [r.decided_by for r in modes.get("reference").requests(gens, CASCADE_SPEC, TEMPLATE, answer=answer)]


# --- 1. formulas: operators and brackets are never word breaks -------------------------------------

DIFFERENT_FORMULAS = [
    ("y=2x+3", "y=2x-3"),
    ("(1,2)", "[1,2]"),
    (r"(-\infty, 3)", r"(-\infty, 3]"),
    ("a^2+b^2", "a^2-b^2"),
    ("x^2", "x_2"),
]


@pytest.mark.parametrize("candidate,reference", DIFFERENT_FORMULAS)
def test_different_formulas_never_match_and_reach_the_judge(candidate, reference):
    boxed_c, boxed_r = f"So \\boxed{{{candidate}}}.", f"\\boxed{{{reference}}}"
    check = check_answer(boxed_c, boxed_r, BOXED_BOTH)
    assert check.candidate == candidate and check.reference == reference and check.match is False
    assert check_answer(boxed_r, boxed_c, BOXED_BOTH).match is False
    assert cascade([(boxed_c, boxed_r)], BOXED_BOTH) == ["judge"]


@pytest.mark.parametrize(
    "candidate,reference",
    [
        (r"\frac{1}{2}", "0.5"),
        (r"\dfrac{3}{4}", r"\frac{3}{4}"),
        (r"\{2, 1\}", r"\{1, 2\}"),  # a set in any order
        (r"(-\infty, 3]", r"(-\infty, 3]"),
        (r"x \in (1, 2)", "(1, 2)"),
        ("2x+3", "y=2x+3"),  # the reference's assignment: its right-hand side
        (r"\sqrt{8}", r"2\sqrt{2}"),
        ("1,000", "1000"),
        (r"\text{Paris}", "Paris"),
    ],
)
def test_equal_formulas_match_by_rule(candidate, reference):
    boxed_c, boxed_r = f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}"
    check = check_answer(boxed_c, boxed_r, BOXED_BOTH)
    assert check.match is True and check.strict and check.how == BOXED
    assert cascade([(boxed_c, boxed_r)], BOXED_BOTH) == ["rule"]


# --- 2. choice: rejected and retracted letters --------------------------------------------------------


@pytest.mark.parametrize(
    "text,letter",
    [("It can't be C.", "C"), ("The answer is not B.", "B"), ("I would not pick D.", "D")],
)
def test_choice_never_reads_a_letter_the_reply_rejects(text, letter):
    got = extract(text, "choice")
    assert got.value is None and got.reason == f"the reply rejects {letter} and chooses no letter"
    assert check_answer(text, letter, {"candidate": "choice"}).match is False
    assert cascade([(text, letter)], {"candidate": "choice"}) == ["judge"]


def test_choice_after_a_retraction_reads_the_new_letter_and_never_decides_by_rule():
    text = "The answer is A. Wait, no, it is C."
    got = extract(text, "choice")
    assert got.value == "C" and not got.strict
    assert check_answer(text, "C", {"candidate": "choice"}).match is True  # exact match, a fallback
    assert cascade([(text, "C"), (text, "A")], {"candidate": "choice"}) == ["judge", "judge"]


@pytest.mark.parametrize(
    "text,strict",
    [
        ("B", True),
        ("The answer is B.", True),
        ("The answer is B, not C.", True),
        ("\\boxed{B}", True),
        ("A is wrong and \\boxed{B} is right.", True),
        ("The answer is B. The answer is B.", True),
        ("The answer is A. Later: the answer is B.", False),  # two candidates
        ("The answer is B. Actually, let me think again.", False),  # taken back, nothing else chosen
        ("I don't know.\nB", False),  # a last line alone: a fallback
        ("(B) Paris, because vitamin C is needed", False),  # one marked letter: a fallback
        ("The best option is B", False),  # a letter ending the reply: a fallback
    ],
)
def test_choice_is_strict_only_for_the_whole_reply_or_a_stated_answer(text, strict):
    got = extract(text, "choice")
    assert got.value == "B" and got.strict is strict
    assert cascade([(text, "B")], {"candidate": "choice"}) == ["rule" if strict else "judge"]


# --- 3. last_number: a whole number or none, never a fragment ------------------------------------------


@pytest.mark.parametrize(
    "text,value,number",
    [
        (r"So half: $\frac{1}{2}$", r"\frac{1}{2}", parse_number("0.5")),
        (r"It is \dfrac{3}{4}", r"\dfrac{3}{4}", parse_number("0.75")),
        ("Light: 3.0×10⁸", "3.0×10⁸", 300_000_000),
        ("It weighs 1'000 kg", "1'000", 1000),
        ("It took 2½ hours", "2½", parse_number("2.5")),
        ("Add ¾ cup", "¾", parse_number("0.75")),
        ("It is -\\frac{1}{4}", "-\\frac{1}{4}", parse_number("-0.25")),
    ],
)
def test_last_number_reads_the_whole_number(text, value, number):
    got = extract(text, "last_number")
    assert got == Extracted(value, None) and parse_number(got.value) == number


def test_a_fraction_in_latex_never_matches_its_denominator():
    assert check_answer(r"So half: $\frac{1}{2}$", "2", {"candidate": "last_number"}).match is False
    assert check_answer(r"It is \dfrac{3}{4}", "4", {"candidate": "last_number"}).match is False
    assert check_answer(r"It is \dfrac{3}{4}", "0.75", {"candidate": "last_number"}).match is True
    assert check_answer("3.0×10⁸", "300000000", {"candidate": "last_number"}).match is True


@pytest.mark.parametrize("text", ["x^2", "so 2^{10}", r"\sqrt{2}", r"$2\pi$", r"\frac{x}{2}", r"\frac{2}{x}"])
def test_a_number_inside_an_expression_is_no_number(text):
    got = extract(text, "last_number")
    assert got.value is None and got.reason.startswith("the last number is part of an expression")


@pytest.mark.parametrize(
    "text,how,strict",
    [
        ("72", WHOLE_TEXT, True),
        ("The answer is 72.", STATED, True),
        ("The answer is $72.", STATED, True),  # a dollar sign, or math mode: the statement reads past it
        ("The answer is $72$.", STATED, True),
        ("The answer is $70$. The answer is $72$.", STATED, False),  # two candidates
        ("Final answer: **72**", STATED, True),
        ("so #### 72", MARKER, True),
        ("so \\boxed{72}", BOXED, True),
        ("She sold 48 and 24, so 72 in all.", LAST_NUMBER, False),
        ("The answer is 70. No, wait: 72", LAST_NUMBER, False),
        ("The answer is 70. The answer is 72", STATED, False),  # two candidates
        ("The answer is 72. Actually, I am not sure.", STATED, False),
    ],
)
def test_last_number_is_strict_only_in_the_format_asked_for(text, how, strict):
    got = extract(text, "last_number")
    assert got.value == "72" and got.how == how and got.strict is strict
    reference = "Natalia sold 72 clips.\n#### 72"
    methods = {"reference": "gsm8k", "candidate": "last_number"}
    assert cascade([(text, reference)], methods) == ["rule" if strict else "judge"]


def test_gsm8k_with_two_different_markers_is_no_certain_answer():
    assert extract("#### 5\n#### 6", "gsm8k").strict is False
    assert extract("#### 6\n#### 6.0", "gsm8k").strict is True


def test_numbers_compare_as_math_verify_compares_them():
    methods = {"candidate": "last_number"}
    assert check_answer("about 0.333333", "1/3", methods).match  # to 6 decimal places: a float
    assert not check_answer("about 0.33", "1/3", methods).match
    assert check_answer("1,000", "1000.0", methods).match
    assert not check_answer("-5", "5", methods).match


# --- 4. a full stop after a score ----------------------------------------------------------------------


@pytest.mark.parametrize("text,score", [("SCORE: 8.", "8"), ("SCORE: 8.\nDone.", "8"), ("SCORE: 7.5.", "7.5")])
def test_a_full_stop_after_the_score_ends_the_sentence(text, score):
    mode = modes.get("score")
    assert mode.parse_text(text, mode.compile(None), False).verdict == score


def test_a_score_with_more_points_is_still_unparsed():
    mode = modes.get("score")
    assert mode.parse_text("SCORE: 8.5.1", mode.compile(None), False).verdict is None
    assert compile_pattern(mode.pattern).search("SCORE: 10") is not None


def test_math_verify_runs_without_torch():
    # judging/ is torch-free: Math-Verify (sympy and its LaTeX parser) must compare answers with torch unimportable.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for m in ('torch', 'transformers'): sys.modules[m] = None\n"
        "from genjudge.judging.extraction import check_answer\n"
        "assert check_answer('\\\\boxed{\\\\frac{1}{2}}', '\\\\boxed{0.5}', {'candidate': 'boxed', 'reference': 'boxed'}).match\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# --- 5. doubted answers and uncertain matches never decide an item by rule ---------------------------


@pytest.mark.parametrize(
    "text",
    [
        r"$\boxed{5}$ is not the answer; the answer is $6$.",
        r"It is not $\boxed{5}$; it is 6.",
        "$\\boxed{5}$\n\nNo, the answer is 6.",
        "So $\\boxed{5}$.\n\nHmm, that's wrong; the correct value is 6.",
        r"$\boxed{5}$. But I made an error above: the answer should be $6$.",
        r"$\boxed{5}$ (or possibly 6)",
        r"It is not $\boxed{5}$.",
        r"$\boxed{5}$ is wrong.",
    ],
)
def test_a_box_the_reply_doubts_is_read_but_never_decides(text):
    got = extract(text, "boxed")
    assert got.value == "5" and got.how == BOXED and got.strict is False
    assert check_answer(text, r"\boxed{5}", BOXED_BOTH).match is True  # exact match still reads it
    assert cascade([(text, r"\boxed{5}")], BOXED_BOTH) == ["judge"]


@pytest.mark.parametrize(
    "text", [r"So the answer is $\boxed{5}$.", r"It is not 4, so $\boxed{5}$.", r"$\boxed{5}$ apples: 5 in all."]
)
def test_a_box_nothing_doubts_stays_strict(text):
    assert extract(text, "boxed").strict is True
    assert cascade([(text, r"\boxed{5}")], BOXED_BOTH) == ["rule"]


def test_a_marker_followed_by_another_number_is_not_certain():
    assert extract("#### 5\nNo, the answer is 6.", "gsm8k").strict is False
    assert extract("#### 5\n(5 apples)", "gsm8k").strict is True


@pytest.mark.parametrize(
    "text,letter",
    [
        ("Answer A claims the sky is green, which is false. The correct choice is C.", "A"),
        ("The answer is A large number of cases suggests C", "A"),
        ("The answer is B, or possibly C", "B"),
        ("The answer is B, I think, though it might be D.", "B"),
        ("Answer: B; also C", "B"),
        ("Answer: B and D are both wrong; A", "B"),
        ("The answer is A, not B... hmm, B seems right", "A"),
    ],
)
def test_a_stated_letter_beside_another_letter_not_rejected_never_decides(text, letter):
    assert extract(text, "choice").strict is False
    assert cascade([(text, letter)], {"candidate": "choice"}) == ["judge"]


@pytest.mark.parametrize(
    "text,reference",
    [("The answer is 1,2,3", "#### 3"), ("#### 1,2,3", "#### 3")],
)
def test_a_stated_list_is_no_certain_number(text, reference):
    methods = {"reference": "gsm8k", "candidate": "last_number" if "answer" in text else "gsm8k"}
    assert check_answer(text, reference, methods).strict is False
    assert cascade([(text, reference)], methods) == ["judge"]


@pytest.mark.parametrize(
    "candidate,reference,match",
    [
        ("2/3", "2.3", True),  # normalised text alike: exact match says so, the cascade does not decide
        ("2*3", "2.3", True),
        ("1,000", "1.000", True),
        ("3:2", "3.2", True),
        ("n!", "n", True),
        ("|x|", "x", True),
    ],
)
def test_texts_that_drop_different_punctuation_match_uncertainly(candidate, reference, match):
    check = check_answer(candidate, reference)
    assert check.match is match and check.strict is False
    assert cascade([(candidate, reference)], None) == ["judge"]
    # the same texts with nothing dropped differently are certain
    assert check_answer("Paris.", "paris").strict and check_answer("The Eiffel Tower", "Eiffel Tower").strict
    assert cascade([("Paris.", "paris")], None) == ["rule"]


def test_a_regex_answer_compared_as_text_is_certain_only_with_the_same_punctuation():
    methods = {"candidate": r"Answer: (.*)"}
    assert check_answer("Answer: x/2", "x*2", methods).strict is False
    assert check_answer("Answer: n!", "n", methods).strict is False
    assert check_answer("Answer: Paris", "paris", methods).strict is True


@pytest.mark.parametrize(
    "candidate,reference,match",
    [
        ("2e-7", "3e-7", False),  # powers of ten are exact, as Math-Verify keeps 1.5/10**7
        ("5e-7", "-5e-7", False),
        (r"2\times10^{-8}", r"9\times10^{-8}", False),
        (r"1.5\times10^{-7}", r"3\times10^{-7}", False),
        ("1.5e-3", "0.0015", True),
        ("1,5", "1.5", False),  # in a box, 1,5 is the list {1, 5}
        ("-1,2", "-1.2", False),
        ("1,5", "5,1", True),
        ("1,000", "1000", True),
    ],
)
def test_boxed_numbers_compare_exactly_where_math_verify_does(candidate, reference, match):
    check = check_answer(f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}", BOXED_BOTH)
    assert check.match is match
    assert cascade([(f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}")], BOXED_BOTH) == [
        "rule" if match else "judge"
    ]


@pytest.mark.parametrize(
    "candidate,reference",
    [("0.333333", r"\frac{1}{3}"), ("0.0000002", "0.0000004"), ("0.0000005", "-0.0000005")],
)
def test_a_match_only_to_six_decimal_places_never_decides(candidate, reference):
    boxed_c, boxed_r = f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}"
    check = check_answer(boxed_c, boxed_r, BOXED_BOTH)
    assert check.match is True and check.strict is False  # Math-Verify's verdict, uncertain
    assert cascade([(boxed_c, boxed_r)], BOXED_BOTH) == ["judge"]
    gsm = {"reference": "gsm8k", "candidate": "last_number"}
    assert check_answer(f"The answer is {candidate}", f"#### {reference}", gsm).strict is False


@pytest.mark.parametrize(
    "text,value,how",
    [
        ("The answer is 6, not 5.", "6", STATED),
        ("It is 12 dollars, not 10", "12", LAST_NUMBER),
        ("I have 3 apples, not 4, so the answer is 3.", "3", STATED),
    ],
)
def test_last_number_skips_a_number_the_reply_sets_aside(text, value, how):
    got = extract(text, "last_number")
    assert (got.value, got.how) == (value, how)
    assert got.strict is (text.endswith("the answer is 3."))  # certain only with nothing set aside after it
    methods = {"reference": "gsm8k", "candidate": "last_number"}
    assert check_answer(text, f"#### {value}", methods).match is True
