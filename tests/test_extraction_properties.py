"""Property tests of answer extraction: any number written in a shape `last_number` reads, at the
end of any text, is extracted with its exact value; no text makes extraction raise."""

import re
from fractions import Fraction

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from genjudge.judging.extraction import BUILTINS, Extracted, answers_match, extract, parse_number

# Text after the number: nothing, or punctuation or a space and then anything without a digit, except
# what continues an expression after a space (a power, an index, a LaTeX command, √, π, `}{`): the
# number is then part of that expression and no answer (tests/test_answers_math.py).
NO_DIGITS = st.text(st.characters(blacklist_categories=("Nd", "No", "Cs")), max_size=20)
CONTINUES_EXPRESSION = re.compile(
    r"\s*(?:[\^_\u221a\u03c0]|\}\s*\{|\\(?:pi|sqrt|infty|frac|dfrac|tfrac|sin|cos|tan|log|ln|exp)\b)"
)
AFTER = st.one_of(
    st.just(""),
    st.tuples(st.sampled_from([".", "!", "?", " ", "\n", ")", ", "]), NO_DIGITS)
    .map("".join)
    .filter(lambda after: not CONTINUES_EXPRESSION.match(after)),
)


def signed(text: str, value, negative: bool, currency: str = ""):
    return ("-" if negative else "") + currency + text, -value if negative else value


@st.composite
def integers(draw):
    n = draw(st.integers(0, 10**12))
    text = draw(st.sampled_from([str(n), f"{n:,}"]))
    currency = draw(st.sampled_from(["", "$", "€", "£"]))
    percent = draw(st.sampled_from(["", "%"]))
    return signed(text + percent, Fraction(n), draw(st.booleans()), currency)


@st.composite
def decimals(draw):
    places = draw(st.integers(1, 6))
    d = draw(st.decimals(min_value=0, max_value=10**9, places=places, allow_nan=False, allow_infinity=False))
    shapes = [f"{d:f}", f"{d:,f}"]
    if places <= 2:  # a decimal comma: one or two digits after it
        shapes.append(f"{d:f}".replace(".", ","))
    return signed(draw(st.sampled_from(shapes)), Fraction(d), draw(st.booleans()), draw(st.sampled_from(["", "$"])))


@st.composite
def fractions(draw):
    a, b = draw(st.integers(0, 10**6)), draw(st.integers(1, 10**6))
    whole = draw(st.one_of(st.none(), st.integers(1, 10**4)))
    text, value = (f"{a}/{b}", Fraction(a, b)) if whole is None else (f"{whole} {a}/{b}", whole + Fraction(a, b))
    return signed(text, value, draw(st.booleans()))


@st.composite
def scientific(draw):
    m = draw(st.decimals(min_value=0, max_value=1000, places=draw(st.integers(0, 3)), allow_nan=False))
    k = draw(st.integers(-30, 30))
    text = draw(st.sampled_from([f"{m:f}e{k}", f"{m:f}E{k}", f"{m:f} × 10^{k}", f"{m:f} \\times 10^{{{k}}}"]))
    return signed(text, Fraction(m) * Fraction(10) ** k, draw(st.booleans()))


NUMBERS = st.one_of(integers(), decimals(), fractions(), scientific())


# No deadline: the first example pays the extraction's first use (its lazily compiled patterns).
@settings(deadline=None)
@given(st.text(max_size=60), NUMBERS, AFTER)
def test_a_number_ending_any_text_is_extracted_with_its_value(before, number, after):
    text, value = number
    got = extract(f"{before} is {text}{after}", "last_number")
    assert got.ok and parse_number(got.value) == value, (text, got)
    assert answers_match(got.value, f"{value.numerator}/{value.denominator}")


@settings(deadline=None)
@given(st.text(max_size=60), NUMBERS, AFTER)
def test_the_number_after_the_last_gsm8k_marker_is_extracted(before, number, after):
    assume("####" not in after)  # a later marker would be the last one
    text, value = number
    got = extract(f"{before}\n#### {text}{after}", "gsm8k")
    assert got.ok and parse_number(got.value) == value, (text, got)


@settings(deadline=None)
@given(NUMBERS)
def test_parse_number_reads_every_shape_on_its_own(number):
    text, value = number
    assert parse_number(text) == value
    assert parse_number(f" {text}. ") == value  # around it: spaces and a full stop


@settings(deadline=None)
@given(st.text(), st.sampled_from([*BUILTINS, None, r"answer: (\w+)"]))
def test_extraction_never_raises_and_says_why_when_it_finds_nothing(text, method):
    got = extract(text, method)
    assert isinstance(got, Extracted)
    assert (got.value is None) != (got.reason is None)
    assert got.value is None or got.value.strip()


@settings(deadline=None)
@given(st.text(), st.text())
def test_parse_number_and_answers_match_never_raise(a, b):
    value = parse_number(a)
    assert value is None or isinstance(value, Fraction)
    assert answers_match(a, b) == answers_match(b, a)
