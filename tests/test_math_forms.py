"""Forms Math-Verify misreads, read as genjudge documents them (docs/reference-checks.md, "Forms
Math-Verify misreads"): LaTeX's separators between groups of digits, per cents, and matches that only
hold within Math-Verify's numeric tolerance. Each case with both outcomes: the right match is made (and
decided by rule where it is certain), the misreading never matches, or never decides by rule.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_answers_math import BOXED_BOTH, cascade

from genjudge.judging.extraction import check_answer, extract, parse_number

# --- LaTeX's separators between groups of digits ---------------------------------------------------

# Each form LaTeX writes between groups of digits: thin, negative thin, medium, thick and control spaces,
# a comma in braces and MATH's comma before a negative thin space.
TEX_SEPARATORS = [r"\,", r"\!", r"\:", r"\;", r"\ ", "{,}", r",\!", r"{,}\!"]
GSM = {"reference": "gsm8k", "candidate": "last_number"}


@pytest.mark.parametrize("sep", TEX_SEPARATORS)
def test_a_latex_thousands_separator_in_a_box_groups_thousands(sep):
    # Math-Verify alone reads 2\,500 as 502 and 12\,000 as 0 (12*0): a wrong match decided by rule.
    rows = []
    for written, value, misread in [(f"2{sep}500", "2500", "502"), (f"12{sep}000", "12000", "0")]:
        right = check_answer(f"\\boxed{{{written}}}", f"\\boxed{{{value}}}", BOXED_BOTH)
        assert right.match is True and right.strict
        assert check_answer(f"\\boxed{{{written}}}", f"\\boxed{{{misread}}}", BOXED_BOTH).match is False
        rows += [(f"\\boxed{{{written}}}", f"\\boxed{{{value}}}"), (f"\\boxed{{{written}}}", f"\\boxed{{{misread}}}")]
    assert cascade(rows, BOXED_BOTH) == ["rule", "judge"] * 2


@pytest.mark.parametrize("sep", TEX_SEPARATORS)
def test_a_latex_thousands_separator_inside_an_expression_groups_thousands(sep):
    # Math-Verify alone reads (1\,000, 2) as the interval (0, 2) and (1{,}000, 2) as the tuple (1, 0, 2).
    answer = f"\\boxed{{(1{sep}000, 2)}}"
    assert check_answer(answer, r"\boxed{(1000, 2)}", BOXED_BOTH).match is True
    for misread in [r"\boxed{(0, 2)}", r"\boxed{(1, 0, 2)}"]:
        assert check_answer(answer, misread, BOXED_BOTH).match is False
    assert check_answer(f"\\boxed{{1{sep}234{sep}567 x}}", r"\boxed{1234567x}", BOXED_BOTH).match is True
    assert check_answer(f"\\boxed{{1{sep}234{sep}567 x}}", r"\boxed{802x}", BOXED_BOTH).match is False


@pytest.mark.parametrize("sep", [r"\,", r"\!", r"\:", r"\;", r"\ "])
def test_digits_a_latex_space_joins_into_no_thousands_are_no_number(sep):
    # 12\,50 groups no thousands: neither 1250 nor Math-Verify's 62, nor the fragment 50; only itself.
    written = f"12{sep}50"
    for other in ["1250", "62", "50", "12.5"]:
        assert check_answer(f"\\boxed{{{written}}}", f"\\boxed{{{other}}}", BOXED_BOTH).match is False
        assert check_answer(f"So ${written}$.", f"#### {other}", GSM).match is False
    assert check_answer(f"\\boxed{{{written}}}", f"\\boxed{{{written}}}", BOXED_BOTH).match is True
    got = extract(f"So ${written}$.", "last_number")
    assert got.value is None and got.reason.startswith("digits grouped in no known way")


@pytest.mark.parametrize("sep", ["{,}", r",\!", r"{,}\!"])
def test_a_latex_comma_before_other_groups_is_a_comma(sep):
    # As `12,50`: in a box a list (MATH writes several answers so), in last_number a decimal comma.
    assert check_answer(f"\\boxed{{12{sep}50}}", r"\boxed{12, 50}", BOXED_BOTH).match is True
    assert check_answer(f"\\boxed{{12{sep}50}}", r"\boxed{1250}", BOXED_BOTH).match is False
    assert parse_number(extract(f"It is ${3}{sep}14$", "last_number").value) == parse_number("3.14")


@pytest.mark.parametrize("sep", TEX_SEPARATORS)
def test_last_number_reads_a_latex_separated_number_whole(sep):
    # Before, `$10{,}000$` and `10,\!000` read as `000`, which matched `#### 0` and not `#### 10000`.
    text = f"So the total is ${10}{sep}000$ dollars."
    got = extract(text, "last_number")
    assert got.value == f"10{sep}000" and parse_number(got.value) == 10000
    assert check_answer(text, "#### 10000", GSM).match is True
    assert check_answer(text, "#### 10,000", GSM).match is True
    for fragment in ["0", "000", "10"]:
        assert check_answer(text, f"#### {fragment}", GSM).match is False
    assert parse_number(f"1{sep}234{sep}567.5") == parse_number("1234567.5")


@given(st.integers(1000, 10**12), st.sampled_from(TEX_SEPARATORS))
def test_every_latex_grouping_of_thousands_reads_its_number(n, sep):
    written = f"{n:,}".replace(",", sep)
    assert parse_number(written) == n
    assert extract(f"Total: ${written}$", "last_number").value == written


# --- a per cent is its number, however it is written -----------------------------------------------

PER_CENT_FORMS = ["50%", r"50\%", r"50 \%", r"50\,\%", "50 percent"]


@pytest.mark.parametrize("form", PER_CENT_FORMS)
def test_a_per_cent_is_its_number_in_every_form(form):
    # Math-Verify alone reads 50\% as 50 or 0.5, whichever the other side is; genjudge read 50% as 50
    # only. Both read 50: a reference 50 matches, a reference 0.5 or 1/2 does not (the judge decides).
    box = f"\\boxed{{{form}}}"
    right = check_answer(box, r"\boxed{50}", BOXED_BOTH)
    assert right.match is True and right.strict
    for value in [r"\boxed{0.5}", r"\boxed{\frac{1}{2}}"]:
        assert check_answer(box, value, BOXED_BOTH).match is False
        assert check_answer(value, box, BOXED_BOTH).match is False  # a per cent reference alike
    assert check_answer(r"\boxed{50}", box, BOXED_BOTH).match is True
    assert cascade([(box, r"\boxed{50}"), (box, r"\boxed{0.5}")], BOXED_BOTH) == ["rule", "judge"]
    # Inside an expression, and read by last_number, the same reading.
    assert check_answer(f"\\boxed{{\\{{{form}, 20\\%\\}}}}", r"\boxed{\{50, 20\}}", BOXED_BOTH).match is True
    assert check_answer(f"\\boxed{{\\{{{form}, 20\\%\\}}}}", r"\boxed{\{0.5, 0.2\}}", BOXED_BOTH).match is False
    assert check_answer(f"It rose by ${form}$.", "#### 50", GSM).match is True
    assert check_answer(f"It rose by ${form}$.", "#### 0.5", GSM).match is False


# --- a match within Math-Verify's tolerance is no certain match --------------------------------------

PMATRIX = r"\begin{{pmatrix}} {} \\ 1 \end{{pmatrix}}"


@pytest.mark.parametrize(
    "candidate,reference",
    [
        ("1.414214", r"\sqrt{2}"),
        ("0.785398", r"\frac{\pi}{4}"),
        ("0.785398163397448", r"\frac{\pi}{4}"),  # 15 digits: still a rounding, never pi/4
        (r"(0.6, 2.666667]", r"(\frac{3}{5}, \frac{8}{3}]"),
        (r"\{0.333333, 1\}", r"\{\frac{1}{3}, 1\}"),
        (PMATRIX.format("0.333333"), PMATRIX.format(r"\frac{1}{3}")),
    ],
)
def test_a_formula_matched_only_to_six_decimal_places_goes_to_the_judge(candidate, reference):
    # Before, every Math-Verify match was certain: 1.414214 against \sqrt{2} was decided by rule while
    # 0.333333 against 1/3 went to the judge. Now neither is decided by rule.
    boxed_c, boxed_r = f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}"
    check = check_answer(boxed_c, boxed_r, BOXED_BOTH)
    assert check.match is True and check.strict is False
    assert cascade([(boxed_c, boxed_r)], BOXED_BOTH) == ["judge"]


@pytest.mark.parametrize(
    "candidate,reference",
    [
        (r"0.75\pi", r"\frac{3\pi}{4}"),
        (r"1.5\sqrt{2}", r"\frac{3\sqrt{2}}{2}"),
        (r"(0.6, 2.5]", r"(\frac{3}{5}, \frac{5}{2}]"),
        (r"\{0.5, 1\}", r"\{\frac{1}{2}, 1\}"),
        (PMATRIX.format("0.5"), PMATRIX.format(r"\frac{1}{2}")),
        ("x=0.25", r"x=\frac{1}{4}"),
    ],
)
def test_a_formula_whose_decimals_are_exactly_equal_is_decided_by_rule(candidate, reference):
    boxed_c, boxed_r = f"\\boxed{{{candidate}}}", f"\\boxed{{{reference}}}"
    check = check_answer(boxed_c, boxed_r, BOXED_BOTH)
    assert check.match is True and check.strict is True
    assert cascade([(boxed_c, boxed_r)], BOXED_BOTH) == ["rule"]
