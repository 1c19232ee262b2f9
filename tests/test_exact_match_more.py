"""Exact match, choice extraction, grouped numbers and majority votes: the cases a review found wrong.

- textnorm: a choice letter beside other letters is not an article to drop; Unicode punctuation is
  punctuation; a minus sign before a number is kept.
- choice: several letters with none stated as the answer are ambiguous, never the last one; \\boxed{B}
  states the answer.
- last_number / gsm8k: numbers grouped by spaces (SI/ISO, French) and Indian grouping are one number;
  a number grouped wrongly is no number, never a fragment of it.
- majority vote: by value for numbers (`1,000` and `1000` one answer, `5` and `-5` two), both in
  genjudge and in the independent reference computation (tests/reference.py).
"""

import string
import unicodedata
from fractions import Fraction

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import normalise as reference_normalise
from reference import sample_measures as reference_sample_measures

from genjudge.judging.extraction import Extracted, answers_match, check_answer, extract, parse_number
from genjudge.judging.sampling_stats import majority_vote, reference_measures, vote_key
from genjudge.judging.textnorm import exact_match, normalise

# --- normalised exact match -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        ("A, C", "C"),  # a choice letter among letters is no article
        ("B", "A B"),
        ("A/B", "B"),
        ("A) Paris", "Paris"),
        ("“A”", "“The”"),  # the quotes are punctuation: "a" against "the"
        ("-5", "5"),  # the sign is no punctuation
        ("−5", "5"),
        ("(-5)", "5"),
        ("an", "A"),
        ("", "A"),
        # what changes a formula is kept, never a word break
        ("y=2x+3", "y=2x-3"),
        ("(1,2)", "[1,2]"),
        ("(-\\infty, 3)", "(-\\infty, 3]"),
        ("a^2+b^2", "a^2-b^2"),
        ("x^2", "x_2"),
        ("x<1", "x>1"),
        ("10-5", "10 5"),
        ("(-5)", "-5"),
    ],
)
def test_texts_that_differ_do_not_match(a, b):
    assert exact_match(a, b) is False and exact_match(b, a) is False


@pytest.mark.parametrize(
    "a,b",
    [
        ("“A”", "A"),  # Unicode punctuation: curly quotes, a full-width stop and brackets
        ("A。", "A"),
        ("（A）", "a"),
        ("«Paris»", "Paris"),
        ("-5", "\u22125"),  # the Unicode minus sign is a minus sign
        ("10−5", "10-5"),
        ("A cat", "cat"),  # an article before its word is dropped
        ("the Eiffel Tower", "Eiffel tower"),
        ("The Paris.", "paris"),
        ("a “big” cat", "big cat"),
        ("The A", "A"),
        ("A", "a"),
    ],
)
def test_texts_that_match(a, b):
    assert exact_match(a, b) is True and exact_match(b, a) is True


def test_normalise_keeps_letters_and_signs():
    assert normalise("“A”") == "a" and normalise("A。") == "a" and normalise("（A）") == "a"
    assert normalise("A, C") == "a c" and normalise("A/B") == "a b" and normalise("A B") == "a b"
    assert normalise("-5") == "-5" and normalise("\u22125") == "-5" and normalise("x = -5") == "x = -5"
    assert normalise("(1, 2]") == "(1 2]" and normalise("y = 2x+3.") == "y = 2x+3" and normalise("x_2") == "x_2"
    assert normalise("a an the") == "the"  # the last word always stays: never empty
    assert normalise("Vitamin A") == "vitamin a"


TEXTS = st.text(st.sampled_from(list("aAbtheTn -−.,5“”()（）。_/'\"[]{}=<>^+\\") + ["\u00a0", "x"]), max_size=16)


@given(st.one_of(TEXTS, st.text(max_size=24)))
def test_the_reference_normalisation_agrees_with_textnorm(text):
    # tests/reference.py writes the documented rule separately; both must give the same text.
    assert reference_normalise(text) == normalise(text)


@given(st.text(max_size=24))
def test_normalised_text_is_empty_only_for_text_without_words(text):
    out = normalise(text)
    assert out == " ".join(out.split())
    punct = set(string.punctuation) - set("+-^_()[]{}=<>\\")  # those are kept: part of a formula
    words = any(
        not (c.isspace() or (c not in "+-^_()[]{}=<>\\" and (c in punct or unicodedata.category(c).startswith("P"))))
        for c in text
    )
    assert (out != "") == words


# --- choice -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["I think it's B, not A.", "A or B", "A, C", "A and C", "Both A and C.", "A. Paris\nB. London"],
)
def test_several_letters_with_none_stated_are_ambiguous(text):
    got = extract(text, "choice")
    assert got.value is None and got.reason.startswith("ambiguous: several choices")


@pytest.mark.parametrize("text", ["The answer is A and C", "Answer: (A) or (B)", "The answer is (b) or (c)."])
def test_a_stated_answer_naming_several_letters_is_ambiguous(text):
    got = extract(text, "choice")
    assert got.value is None and got.reason.startswith("ambiguous: the stated answer names several choices")


@pytest.mark.parametrize(
    "text,value",
    [
        ("The final answer is $\\boxed{B}$", "B"),
        ("\\boxed{(d)}", "D"),
        ("So \\boxed{\\text{C}}.", "C"),
        ("A is wrong and \\boxed{B} is right.", "B"),  # stated wins over mentioned letters
        ("(b)", "B"),
        ("Answer: c", "C"),
        ("B", "B"),
        ("**B**", "B"),
        ("The answer is C, not option B.", "C"),
        ("The answer is A, because it is.", "A"),  # a comma then a word: no list
        ("A is wrong, B is weak.\n\nC", "C"),  # a last line that is the letter alone
        ("A good choice is (B).", "B"),  # "A" before a word is the article
        ("A Tale of Two Cities is (C).", "C"),
        ("I think (D) is right.", "D"),
        # one marked letter is the choice, whatever other capitals the reply mentions
        ("(B) Paris, because vitamin C is needed", "B"),
        ("B) Paris. Option C is wrong", "B"),
        ("**C** since A fails", "C"),
    ],
)
def test_choice_reads_the_marked_answer(text, value):
    assert extract(text, "choice") == Extracted(value, None)


# --- numbers grouped by spaces and Indian grouping ----------------------------------------------------


@pytest.mark.parametrize(
    "text,value,number",
    [
        ("1 234,50", "1 234,50", Fraction(2469, 2)),
        ("Le total est 1 234,50 €", "1 234,50", Fraction(2469, 2)),
        ("12 500", "12 500", 12500),
        ("1\u00a0234", "1\u00a0234", 1234),  # a no-break space
        ("1\u2009234.5 m", "1\u2009234.5", Fraction(2469, 2)),  # a thin space, a decimal point
        ("1\u202f000 000 people.", "1\u202f000 000", 1_000_000),  # a narrow no-break space
        ("1 000 000", "1 000 000", 1_000_000),
        ("It is -1 234.", "-1 234", -1234),
        ("1,23,456", "1,23,456", 123456),
        ("Rs. 12,34,56,789.50", "12,34,56,789.50", Fraction(246913579, 2)),
        ("in 2 000 cases", "2 000", 2000),
        ("the numbers 1 2 3", "3", 3),  # groups of one digit: three numbers
        ("1 234 5678", "5678", 5678),  # a group of four: its own number
        ("It takes 2 1/2 hours.", "2 1/2", Fraction(5, 2)),  # still a mixed number
        ("It is 2019 100 years on", "100", 100),  # a head of four digits groups nothing
    ],
)
def test_grouped_numbers_are_one_number(text, value, number):
    assert extract(text, "last_number") == Extracted(value, None)
    assert parse_number(value) == number


@pytest.mark.parametrize("text", ["10,000,00", "The total is 1,000,2.", "x 1,2,345"])
def test_a_number_grouped_wrongly_is_no_number(text):
    got = extract(text, "last_number")
    assert got.value is None and "grouped in no known way" in got.reason
    assert parse_number(text.split()[-1]) is None


def test_gsm8k_reads_a_space_grouped_number():
    assert extract("so\n#### 1 234", "gsm8k") == Extracted("1 234", None)
    assert extract("#### 10,000,00", "gsm8k").value is None
    assert answers_match(extract("Le total est 1 234,50 €", "last_number").value, "1234.5")
    assert not answers_match(extract("Le total est 1 234,50 €", "last_number").value, "234.5")


@given(st.integers(1000, 10**12), st.sampled_from([" ", "\u00a0", "\u2009", "\u202f"]), st.booleans())
def test_any_space_grouped_integer_is_read_whole(n, space, negative):
    text = ("-" if negative else "") + f"{n:,}".replace(",", space)
    got = extract(f"The total is {text}.", "last_number")
    assert got.ok and parse_number(got.value) == (-n if negative else n)


@given(st.integers(10**5, 10**12))
def test_any_indian_grouped_integer_is_read_whole(n):
    digits = str(n)
    head, last = digits[:-3], digits[-3:]
    pairs = [head[max(i - 2, 0) : i] for i in range(len(head), 0, -2)][::-1]
    text = ",".join([*pairs, last])
    assert extract(f"total {text}", "last_number") == Extracted(text, None)
    assert parse_number(text) == n


# --- majority vote by value ---------------------------------------------------------------------------


def _row(answer):
    return type("Row", (), {"output": answer, "answer_extracted": answer, "answer_reason": None})()


def _samples(outputs, reference):
    """One item's samples as the judge stage writes them, exact match and verdict from extraction."""
    methods = {"reference": "last_number", "candidate": "last_number"}
    checks = [check_answer(o, reference, methods) for o in outputs]
    return pd.DataFrame(
        {
            "id": "q",
            "turn": 1,
            "sample": range(len(outputs)),
            "output": outputs,
            "verdict": ["correct" if c.match else "incorrect" for c in checks],
            "exact_match": [c.match for c in checks],
            "answer_extracted": [c.candidate for c in checks],
            "answer_reason": [c.reason for c in checks],
        }
    )


def test_vote_keys_are_values_for_numbers_and_text_otherwise():
    assert vote_key(_row("1,000")) == vote_key(_row("1000")) == vote_key(_row("1000.0")) == "#1000"
    assert vote_key(_row("5")) != vote_key(_row("-5")) and vote_key(_row("-5")) == vote_key(_row("\u22125"))
    assert vote_key(_row("1 234,50")) == vote_key(_row("1234.5"))
    assert vote_key(_row("A")) == "a" and vote_key(_row("The Paris.")) == "paris"
    assert vote_key(_row("5!")) != vote_key(_row("5"))  # a text that is no number never votes with one


@pytest.mark.parametrize(
    "outputs,reference,agreement,vote_em",
    [
        (["5", "-5", "-5"], "5", 2 / 3, 0.0),  # -5 wins 2 to 1, and is wrong
        (["7", "1,000", "1000"], "1000", 2 / 3, 1.0),  # 1000 has two votes
        (["7", "7", "1,000", "1000.0", "1000"], "1000", 3 / 5, 1.0),
    ],
)
def test_majority_vote_counts_numbers_by_value(outputs, reference, agreement, vote_em):
    df = _samples(outputs, reference)
    m = reference_measures(df)
    assert m["answer_agreement"]["value"] == pytest.approx(agreement)
    assert m["majority_vote_exact_match"]["value"] == vote_em
    assert m["majority_vote_accuracy"]["value"] == vote_em
    # The independent computation (tests/reference.py) keys the votes the same way.
    ref = reference_sample_measures(df, "reference")
    assert ref["majority_vote_accuracy"]["value"] == vote_em


def test_majority_vote_of_values():
    votes = [vote_key(_row(a)) for a in ["5", "-5", "\u22125"]]
    assert majority_vote(votes, ["correct", "incorrect", "incorrect"]) == ("#-5", 2 / 3, False)


@pytest.mark.parametrize(
    "text, value",
    [
        ("The answer is B, C is wrong.", "B"),
        ("The answer is B and A is incorrect.", "B"),
        ("My answer is A, B is wrong", "A"),
        ("The best option is B", "B"),
        ("Vitamin C deficiency causes scurvy.", None),  # a letter in passing is no choice
        ("E = mc^2 so more mass", None),
    ],
)
def test_a_stated_answer_ends_where_its_clause_does_and_a_letter_in_passing_is_no_choice(text, value):
    assert extract(text, "choice").value == value
