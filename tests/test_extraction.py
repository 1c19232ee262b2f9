import re
from fractions import Fraction

import pytest
from judges import ROOT

from genjudge.judging.extraction import Extracted, answers_match, check_method, extract, parse_number

GSM8K_REFERENCE = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"
)


@pytest.mark.parametrize(
    "text,value",
    [
        (GSM8K_REFERENCE, "72"),
        ("so 1000 in all\n#### 1,000", "1,000"),
        ("#### -3", "-3"),
        ("#### $18.50", "18.50"),
        ("#### 5\nlater text #### 6", "6"),  # the last marker
    ],
)
def test_gsm8k_takes_the_number_after_the_last_marker(text, value):
    assert extract(text, "gsm8k") == Extracted(value, None)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("The answer is 72.", "no '####' marker"),
        ("#### seventy-two", "no number after '####' (found 'seventy-two')"),
        ("", "empty text"),
        (None, "empty text"),
    ],
)
def test_gsm8k_without_a_number_says_why(text, reason):
    assert extract(text, "gsm8k") == Extracted(None, reason)


@pytest.mark.parametrize(
    "text,value",
    [
        ("She sold 48 in April and 24 in May, so 72 in all.", "72"),
        ("It costs $1,000.", "1,000"),
        ("x = -5", "-5"),
        ("the result is (\u22127)", "-7"),  # the Unicode minus sign
        ("10-5 = 5", "5"),  # a subtraction, not a negative number
        ("pi is about 3.14.", "3.14"),
        ("half is .5", ".5"),
    ],
)
def test_last_number(text, value):
    assert extract(text, "last_number") == Extracted(value, None)


def test_last_number_without_one():
    assert extract("no digits here", "last_number") == Extracted(None, "no number in the text")


@pytest.mark.parametrize(
    "text,value",
    [
        (r"so the answer is $\boxed{42}$.", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"first \boxed{1}, finally \boxed{ {a}{b} }", "{a}{b}"),  # the last one, stripped
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces neither open nor close
    ],
)
def test_boxed(text, value):
    assert extract(text, "boxed") == Extracted(value, None)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("42", "no \\boxed{...}"),
        (r"\boxed{\frac{1}{2}", "\\boxed{ is never closed (the text may be cut off)"),
        (r"\boxed{ }", "empty \\boxed{}"),
    ],
)
def test_boxed_failures_say_why(text, reason):
    assert extract(text, "boxed") == Extracted(None, reason)


@pytest.mark.parametrize(
    "text,value",
    [
        ("B", "B"),
        ("(c)", "C"),
        ("D.", "D"),
        (" E) ", "E"),
        ("The answer is (B).", "B"),
        ("Answer: **C**", "C"),
        ("The answer is C, not option B.", "C"),  # the stated answer wins over a rejected option
        ("I think (D) is right.", "D"),
        ("B) Paris is the capital.", "B"),
    ],
)
def test_choice(text, value):
    assert extract(text, "choice") == Extracted(value, None)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("A. Paris\nB. London", "ambiguous: several choices (A, B) and no 'answer is X'"),
        ("I do not know.", "no choice letter A-E"),
        ("F", "no choice letter A-E"),
    ],
)
def test_choice_never_guesses(text, reason):
    assert extract(text, "choice") == Extracted(None, reason)


def test_regex_with_one_group_takes_the_last_match():
    assert extract("Final: 42 ... Final: 43", r"Final: (\d+)") == Extracted("43", None)
    assert extract("(?:x) Final answer: Paris", r"(?i)final answer:\s*(\w+)") == Extracted("Paris", None)
    assert extract("nothing", r"Final: (\d+)") == Extracted(None, r"pattern 'Final: (\\d+)' did not match")


@pytest.mark.parametrize(
    "pattern,message",
    [
        ("gsm8", "has 0 capturing groups; it needs exactly one"),  # a misspelt method name
        (r"(\w+): (\d+)", "has 2 capturing groups; it needs exactly one"),
        ("([", "is not a valid regular expression"),
    ],
)
def test_bad_patterns_are_clear_errors(pattern, message):
    with pytest.raises(ValueError, match=message) as err:
        check_method(pattern)
    assert "built-in methods: gsm8k, last_number, boxed, choice" in str(err.value)
    with pytest.raises(ValueError, match=message):
        extract("", pattern)  # even with nothing to extract from


def test_builtins_and_none_pass_the_check():
    for method in ("gsm8k", "last_number", "boxed", "choice", None, r"answer: (\w+)"):
        check_method(method)
    assert extract("  Paris \n", None) == Extracted("Paris", None)


@pytest.mark.parametrize(
    "a,b",
    [
        ("1,000", "1000"),
        ("1000", "1000.0"),
        ("1,000.50", "1000.5"),
        ("-3", "-3.0"),
        ("\u22123.5", "-3.5"),
        ("$18", "18"),
        ("50%", "50"),
        ("0.5", "1/2"),
        (r"\frac{1}{2}", ".5"),
        ("72.", "72"),
        ("Paris", "paris."),
        ("B", "b"),
        ("The Eiffel Tower", "eiffel tower"),
    ],
)
def test_answers_that_match(a, b):
    assert answers_match(a, b) and answers_match(b, a)


@pytest.mark.parametrize(
    "a,b",
    [
        ("-5", "5"),  # textnorm alone would drop the sign
        ("5", "5 apples"),  # a number never matches a non-number
        ("1,2", "12"),
        ("0.5", "5"),
        ("Paris", "London"),
        ("", ""),
        (None, "72"),
        ("72", None),
    ],
)
def test_answers_that_do_not_match(a, b):
    assert not answers_match(a, b)


def test_gsm8k_reference_against_replies():
    reference = extract(GSM8K_REFERENCE, "gsm8k").value
    assert answers_match(extract("So she sold 72 clips.", "last_number").value, reference)
    assert not answers_match(extract("So she sold 70 clips.", "last_number").value, reference)
    reply = extract("She sold a lot of clips.", "last_number")
    assert reply.value is None and reply.reason == "no number in the text"
    assert not answers_match(reply.value, reference)


def test_parse_number():
    assert parse_number("1,000") == 1000
    assert parse_number("-$5") == -5
    assert parse_number("1e3") == 1000 and parse_number("$-5") == -5
    assert parse_number("twelve") is None and parse_number("1/0") is None and parse_number("1,2,3") is None


# Each shape `last_number` reads (config/README.md lists them): the text, the extracted value, its number.
NUMBER_SHAPES = [
    ("So she pays 3/4", "3/4", Fraction(3, 4)),
    ("Half of it: 1/2.", "1/2", Fraction(1, 2)),
    ("The change is -3/4", "-3/4", Fraction(-3, 4)),
    ("It takes 2 1/2 hours.", "2 1/2", Fraction(5, 2)),  # a mixed number
    ("The total is 12,50", "12,50", Fraction(25, 2)),  # a comma before one or two digits: a decimal comma
    ("1,00", "1,00", 1),
    ("So 3,5 litres.", "3,5", Fraction(7, 2)),
    ("The price is 1.234,50", "1.234,50", Fraction(246_9, 2)),  # points group thousands, a decimal comma
    ("1.234.567 people", "1.234.567", 1_234_567),
    ("p = 0,125", "0,125", Fraction(1, 8)),  # a leading 0 groups no thousands
    ("x = 2,3456", "2,3456", Fraction(23456, 10000)),
    ("There are 1,000 apples.", "1,000", 1000),  # a comma before three digits groups thousands
    ("It costs $1,234.50.", "1,234.50", Fraction(246_9, 2)),
    ("about 1.5e3", "1.5e3", 1500),
    ("It is 2E-4 m.", "2E-4", Fraction(1, 5000)),
    ("We get 1.5 × 10^3", "1.5 × 10^3", 1500),
    ("It rose by 25%.", "25", 25),  # the per cent sign is dropped: 25% is 25, not 0.25
    ("the numbers 1,2,3", "3", 3),  # a run of numbers joined by commas is a list
    ("on 12/25/2023", "2023", 2023),  # two slashes: not a fraction
    ("10-5 = 5.", "5", 5),
]


@pytest.mark.parametrize("text,value,number", NUMBER_SHAPES)
def test_last_number_reads_each_shape(text, value, number):
    assert extract(text, "last_number") == Extracted(value, None)
    assert parse_number(value) == number


def test_a_fraction_matches_its_decimal_reference():
    reference = extract("She keeps half.\n#### 0.5", "gsm8k").value
    assert answers_match(extract("Half of it: 1/2.", "last_number").value, reference)
    assert answers_match(extract("So she pays 3/4", "last_number").value, "0.75")
    assert not answers_match(extract("So she pays 3/4", "last_number").value, "4")


@pytest.mark.parametrize(
    "text,value",
    [
        ("The answer is (b).", "B"),
        ("Answer: c", "C"),
        ("answer: (d)\n", "D"),
        ("So the answer is e.", "E"),
    ],
)
def test_choice_reads_a_stated_lower_case_letter(text, value):
    assert extract(text, "choice") == Extracted(value, None)


def test_choice_does_not_read_the_article_a_as_a_letter():
    # "answer is a ..." goes on as a sentence: the article, not choice A.
    got = extract("The answer is a bit unclear: (B) or (C).", "choice")
    assert got == Extracted(None, "ambiguous: several choices (B, C) and no 'answer is X'")


def test_the_documented_table_of_number_shapes_is_what_last_number_does():
    doc = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Answer extraction") : doc.index("`choice` reads")]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) >= 15
    nothing = 0
    for text, extracted, *_ in rows:
        texts = re.findall(r"`([^`]*)`", text)
        if extracted == "nothing":  # digits grouped wrongly, or inside an expression: no number, with the reason
            nothing += 1
            for t in texts:
                got = extract(t, "last_number")
                why = ("grouped in no known way", "part of an expression")
                assert got.value is None and any(w in got.reason for w in why), t
            continue
        values = texts if extracted == "as written" else re.findall(r"`([^`]*)`", extracted)
        assert len(texts) == len(values), text
        for t, v in zip(texts, values):
            assert extract(t, "last_number") == Extracted(v, None), t
    assert nothing >= 1


def test_a_choice_letter_that_is_also_an_article_matches_itself():
    from genjudge.judging.extraction import check_answer
    from genjudge.judging.textnorm import exact_match, normalise

    # Every output set to its reference: each of them matches, "A" too (it normalised to "" before).
    choice = {"reference": "choice", "candidate": "choice"}
    for letter in "ABCDE":
        assert check_answer(letter, letter, choice).match is True, letter
        assert check_answer(f"The answer is ({letter}).", letter, choice).match is True, letter
        assert exact_match(letter, letter) is True, letter
    assert normalise("A") == "a" and normalise("an") == "an" and normalise("The") == "the"
    assert exact_match("a", "A") and not exact_match("B", "A") and not exact_match("an", "A")
    # Beside other words an article is still dropped.
    assert normalise("A cat") == "cat" and exact_match("the Eiffel Tower", "Eiffel tower")
    assert not exact_match("", "A") and not exact_match(None, "A")


def test_decimal_commas_are_read_as_decimals():
    # A price written with points grouping thousands is not its cents; 0,125 is not 125.
    assert extract("The price is 1.234,50", "last_number").value == "1.234,50"
    assert answers_match(extract("The price is 1.234,50", "last_number").value, "1234.50")
    assert not answers_match(extract("The price is 1.234,50", "last_number").value, "50")
    assert not answers_match("0,125", "125") and answers_match("0,125", "0.125")
    assert parse_number("12,500") == 12500 and parse_number("1.2.3") is None
