"""Answer extraction before exact match: the final answer out of a worked solution or a reply.

`extract(text, method)` returns an `Extracted`: the value found, or None with the reason
nothing was found; a failed extraction is never a guess. Methods:

- `gsm8k`: the number after the last `####` (GSM8K's references end in `#### 72`);
- `last_number`: the last number in the text that it does not set aside (`6, not 5` reads 6), in any shape of `numberforms.TOKEN`: `1,000` (a comma before
  three digits, after one to three digits not starting with 0, groups thousands), `1,23,456`
  (Indian grouping: groups of two before the last three), `12 500` and `1 234,50` (a space,
  no-break space or thin space before each group of exactly three digits, after one to three
  digits, groups thousands, as SI/ISO and French write numbers: `2 000` is 2000, `1 2 3` three
  numbers), `12,50`, `0,125` (any other single comma: a decimal comma), `1.234,50` and
  `1.234.567` (points grouping thousands), `-3/4`, `2 1/2`, `1.5e3`, `1.5 × 10^3`, `$18` and
  `25%` (currency and per cent signs dropped); digits grouped in no known way (`10,000,00`) give
  no number, never a fragment of it; config/README.md has the table of shapes;
- `boxed`: the content of the last `\\boxed{...}`, nested braces included;
- `choice`: a single letter A-E, never a guess: the whole reply (`B`, `(B)`, `B.`), else the last
  stated answer: "answer is B" / "Answer: (B)" (lower case where it cannot be a word: "answer is
  (b)", "Answer: c" ending the line) or `\\boxed{B}`; a stated answer naming several letters
  ("answer is A and C") is ambiguous; else a last line that is the letter alone; else the one
  letter the reply mentions (`(B)`, `B)`, `**B**`, a capital standing alone; "A" before a word is
  the article); several different ones are ambiguous;
- any other string: a regular expression with exactly one capturing group; the last match's
  group is the value;
- None: no extraction, the text itself (stripped).

`answers_match(candidate, reference)` compares two extracted values: numerically when either
is a number (`1,000` = `1000` = `1000.0`, `-5` != `5`, `1/2` = `0.5`, `1.5e3` = `1500`), otherwise as text after
`textnorm.normalise` (case, punctuation, articles and spacing ignored).

Beside this module: `numberforms` (the shapes of numbers and their values), `choice` (the `choice`
method) and `extracted` (what a method returns, and the phrases that take an answer back).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from genjudge.data.dataset import is_missing
from genjudge.judging.choice import choice
from genjudge.judging.extracted import (
    BOXED,
    LAST_LINE,
    LAST_NUMBER,
    MARKED,
    MARKER,
    MENTIONED,
    NEGATION_AFTER,
    PATTERN,
    RETRACTED,
    RETRACTION,
    STATED,
    STRICT,
    WHOLE_TEXT,
    Extracted,
    Rejections,
    found_as,
    not_found,
    retracted_after,
)
from genjudge.judging.numberforms import (
    MINUS_CLASS,
    TOKEN,
    leading_signs,
    math_number,
    parse_number,
    token_text,
    token_value,
)
from genjudge.judging.textnorm import dropped, normalise

BUILTINS = ("gsm8k", "last_number", "boxed", "choice")
# The names of how an answer was found are re-exported: callers know them from here.
__all__ = [
    "BUILTINS", "BOXED", "LAST_LINE", "LAST_NUMBER", "MARKED", "MARKER", "MENTIONED", "PATTERN", "RETRACTED",
    "STATED", "STRICT", "WHOLE_TEXT", "NO_ANSWER", "AnswerCheck", "Extracted", "answers_match", "certain",
    "check_answer", "check_method", "extract", "parse_number",
]  # fmt: skip


def _snippet(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[:n] + "...")


def _doubted(rest: str, values: set) -> bool:
    """Whether the text after an answer takes it back or gives a number other than `values`
    (`\\boxed{5}. No, the answer is 6.`, `\\boxed{5} (or possibly 6)`): the answer is then not certain."""
    return bool(RETRACTION.search(rest)) or any(token_value(t) not in values for t in TOKEN.finditer(rest))


def _gsm8k(text: str) -> Extracted:
    at = text.rfind("####")
    if at < 0:
        return not_found("no '####' marker")
    after = leading_signs(text[at + 4 :].lstrip())
    m = TOKEN.match(after)
    if not m:
        return not_found(f"no number after '####' (found {_snippet(text[at + 4 :])})")
    # One candidate: every marker gives the same number, and it is one number (`1,2,3` is a list).
    values = _marker_values(text)
    one = len(values) == 1 and None not in values
    return _number(m, MARKER, one and not _doubted(after[m.end() :], values))


_MARKER = re.compile("####")


def _marker_values(text: str) -> set:
    """The values of the numbers after the markers (None where there is none), as far as it takes to
    find two. A number never holds a `#`, so each is read from the text up to the next marker, and a
    stretch met before is not read again: a reply that repeats its marker costs one pass over it."""
    starts = [m.start() for m in _MARKER.finditer(text)]
    stretches = {text[at + 4 : stop] for at, stop in zip(starts, [*starts[1:], len(text)])}
    values = set()
    for stretch in stretches:
        m = TOKEN.match(leading_signs(stretch.lstrip()))
        values.add(parse_number(m.group(0)) if m else None)
        if len(values) > 1:
            break
    return values


def _number(m: re.Match, how: str = LAST_NUMBER, strict: bool = False) -> Extracted:
    value = token_text(m)
    if value is None:
        return not_found(f"digits grouped in no known way ({m.group('n')!r}): not read as a number")
    return found_as(value, how, strict)


# A number that is part of an expression, never an answer on its own: a power's base or exponent, an
# index, a root, a LaTeX command's argument (`x^2`, `2^{10}`, `a_3`, `\\sqrt{2}`, `\\frac{x}{2}`), or
# one followed by a constant or a function (`2\\pi`, `3\\sqrt{2}`).
_WRAPPERS = r"(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|mbox|bf)"
_EXPRESSION_BEFORE = re.compile(
    rf"(?:[\^_]\s*\{{?|\}}\s*\{{|\\(?!{_WRAPPERS}\b)[a-zA-Z]+\s*(?:\[[^\]]*\]\s*)?\{{)\s*[+{MINUS_CLASS}]?\s*$"
)
_EXPRESSION_AFTER = re.compile(
    r"\s*(?:[\^_]|\}\s*\{|\\(?:pi|sqrt|infty|frac|dfrac|tfrac|sin|cos|tan|log|ln|exp)\b|\u221a|\u03c0)"
)
# "The answer is 72", "Final answer: 72", "answer = **72**": the number a reply states.
_ANSWER_LEAD = re.compile(r"(?i:\b(?:final\s+)?answer)(?i:\s+is)?\s*[:=]?\s*(?:\*\*)?\s*(?:\$\s*)?")
_MARKER_LEAD = re.compile(r"####\s*$")
_BOXED_LEAD = re.compile(r"\\(?:boxed|fbox)\s*\{\s*$")
_ENDING = re.compile(r"[\s.!*$]*")  # what may follow a number that is the whole reply


# A number the reply sets aside after its answer: "The answer is 6, not 5", "12 rather than 10". The
# number starts after the spaces, or after the currency sign (`not $5`, `not $ 5`).
_SET_ASIDE = re.compile(r"(?i)\b(?:not|rather than|instead of)\s*(?:([$€£])\s*)?")
# How far back an expression's head (`\frac{`, `^{`, `\sqrt[3]{`) is looked for before a number.
_EXPRESSION_REACH = 200


def _set_aside_at(text: str) -> set[int]:
    """Where a number the reply sets aside would start: one pass over the text, not one per number."""
    out = set()
    for m in _SET_ASIDE.finditer(text):
        out.add(m.end())
        if m.group(1):
            out.add(m.start(1))
    return out


def _last_number(text: str) -> Extracted:
    tokens = list(TOKEN.finditer(text))
    # The last number the reply does not set aside (`6, not 5` reads 6).
    aside = _set_aside_at(text)
    kept = [t for t in tokens if t.start() not in aside]
    last = kept[-1] if kept else tokens[-1] if tokens else None
    if last is None:
        return not_found("no number in the text")
    before, after = text[: last.start()], text[last.end() :]
    head = _EXPRESSION_BEFORE.search(text, max(0, last.start() - _EXPRESSION_REACH), last.start())
    if head or _EXPRESSION_AFTER.match(after):
        around = text[max(0, last.start() - 12) : last.end() + 12]
        return not_found(f"the last number is part of an expression ({_snippet(around)}): not read as a number")
    found = _number(last)
    if not found.ok:
        return found
    # Strict only where the number is the reply, or the answer it states (one value, nothing taken back).
    if not text[: last.start()].strip() and _ENDING.fullmatch(after):
        return found_as(found.value, WHOLE_TEXT, True)
    if _BOXED_LEAD.search(before):
        return found_as(found.value, BOXED, not retracted_after(text, last.end()))
    if _MARKER_LEAD.search(before):
        return _gsm8k(text)
    stated = [(lead, TOKEN.match(text, lead.end())) for lead in _ANSWER_LEAD.finditer(text)]
    stated = [t for lead, t in stated if t]
    # Compared by where they end: the statement reads past a `$` (currency or math mode) the token holds.
    if stated and stated[-1].end() == last.end():
        values = {parse_number(number) for number in {t.group(0) for t in stated}}
        one = len(values) == 1 and None not in values  # a list (`1,2,3`) is no one number
        # A number set aside after it ("6, not 5") leaves the statement read, but not certain.
        return found_as(found.value, STATED, one and not retracted_after(text, last.end()) and last is tokens[-1])
    return found


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# A brace, or an escaped character (`\{`, `\}`, `\\`), which opens or closes nothing.
_BRACE = re.compile(r"\\.|[{}]", re.S)
_MATH_CLOSE = re.compile(r"\s*\$*\s*")  # the math mode a box was in


def _closing_braces(text: str) -> dict[int, int]:
    """{where a `{` opens: where its `}` closes} for every brace that closes, in one pass over the text
    (a box never closed is not scanned again for each box before it)."""
    out, opened = {}, []
    for m in _BRACE.finditer(text):
        ch = m.group()
        if ch == "{":
            opened.append(m.start())
        elif ch == "}" and opened:
            out[opened.pop()] = m.start()
    return out


def _boxed(text: str) -> Extracted:
    starts = list(_BOXED.finditer(text))
    if not starts:
        return not_found("no \\boxed{...}")
    closes = _closing_braces(text)
    spans = [(m.end(), closes.get(m.end() - 1)) for m in starts]  # each box's content, or None where never closed
    begin, end = spans[-1]
    if end is None:
        return not_found("\\boxed{ is never closed (the text may be cut off)")
    content = text[begin:end].strip()
    if not content:
        return not_found("empty \\boxed{}")
    # One candidate: every box holds the same answer, the last is not rejected ("It is not \\boxed{5}",
    # "\\boxed{5} is wrong"), and nothing after it takes it back or gives another number. A box inside
    # another holds less than it: boxes that nest differ, and are never copied out one by one.
    nested = any(b is None or b_end is None or b_end > nb for (b, b_end), (nb, _) in zip(spans, spans[1:]))
    one = not nested and len({text[b:e].strip() for b, e in spans}) == 1
    rest = text[end + 1 :]
    rejected = Rejections(text).negated(starts[-1].start(), starts[-1].start() + 1) or bool(
        NEGATION_AFTER.match(rest, _MATH_CLOSE.match(rest).end())
    )
    number = parse_number(content)
    doubted = _doubted(rest, {number} if number is not None else set())
    return found_as(content, BOXED, one and not rejected and not doubted)


@lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(
            f"extraction pattern {pattern!r} is not a valid regular expression ({exc}); "
            f"built-in methods: {', '.join(BUILTINS)}"
        ) from None
    if rx.groups != 1:
        raise ValueError(
            f"extraction pattern {pattern!r} has {rx.groups} capturing groups; it needs exactly one, "
            f"around the answer (use (?:...) for the others); built-in methods: {', '.join(BUILTINS)}"
        )
    return rx


def check_method(method: str | None) -> None:
    """Raise ValueError for a method that is neither built in nor a regex with one group."""
    if method is not None and method not in BUILTINS:
        _compile(method)


def _pattern(text: str, pattern: str) -> Extracted:
    matches = [m for m in _compile(pattern).finditer(text) if m.group(1) is not None]
    if not matches:
        return not_found(f"pattern {pattern!r} did not match")
    value = matches[-1].group(1).strip()
    if not value:
        return not_found(f"pattern {pattern!r} matched an empty answer")
    # One candidate: every match gives the same answer.
    one = len({(m.group(1) or "").strip() for m in matches}) == 1
    return found_as(value, PATTERN, one and not retracted_after(text, matches[-1].end()))


_METHODS = {"gsm8k": _gsm8k, "last_number": _last_number, "boxed": _boxed, "choice": choice}


def extract(text: str | None, method: str | None) -> Extracted:
    """The answer in `text` by `method`; value None with a reason when there is none.
    An invalid regex method raises ValueError (check it while planning with `check_method`)."""
    if method is not None and method not in _METHODS:
        _compile(method)  # a bad pattern is a configuration error even for an empty text
    if is_missing(text) or not str(text).strip():
        return not_found("empty text")
    text = str(text)
    if method is None:
        return found_as(text.strip(), WHOLE_TEXT, True)
    if method in _METHODS:
        return _METHODS[method](text)
    return _pattern(text, method)


def answers_match(candidate: str | None, reference: str | None, math: bool = False) -> bool:
    """Whether two extracted answers agree. Two numbers: by Math-Verify's rule (exact, or to 6 decimal
    places where one is written with decimals); with `math` (a `\\boxed{}` answer) anything else is
    compared by Math-Verify as LaTeX (`mathcompare`); otherwise a number never matches a non-number
    (`-5` against `5 apples` is False) and other text is compared after `textnorm.normalise`.
    Missing never matches."""
    from genjudge.judging import mathcompare

    if candidate is None or reference is None:
        return False
    a, b = math_number(candidate, math), math_number(reference, math)
    if a is not None and b is not None:
        return mathcompare.numbers_equal(a, b)
    if math:
        return mathcompare.latex_equal(str(candidate), str(reference))
    if a is not None or b is not None:
        return False
    na, nb = normalise(str(candidate)), normalise(str(reference))
    return nb != "" and na == nb


def certain(candidate: str, reference: str, math: bool = False) -> bool:
    """Whether a match of two extracted answers is beyond doubt, so that it may decide an item by rule:
    equal exactly, never only within Math-Verify's numeric tolerance (6 decimal places). Two numbers:
    equal values (`0.333333` and `1/3`, `0.0000002` and `-0.0000004` match, uncertainly); with `math`,
    anything else: equal with every decimal read as the number it writes (`1.414214` and `\\sqrt{2}`
    match, uncertainly: `mathcompare.latex_certain`); two texts: the same punctuation dropped
    (`textnorm.dropped`: not `2/3` and `2.3`)."""
    from genjudge.judging import mathcompare

    a, b = math_number(candidate, math), math_number(reference, math)
    if a is not None and b is not None:
        return a[0] == b[0]
    if math:
        return mathcompare.latex_certain(str(candidate), str(reference))
    return dropped(candidate) == dropped(reference)


@dataclass(frozen=True)
class AnswerCheck:
    """Exact match of one answer: `match` is None without a (usable) reference."""

    match: bool | None
    candidate: str | None = None  # the extracted answer
    reference: str | None = None  # the extracted reference
    reason: str | None = None  # why there is no match to speak of, or no answer was found
    how: str | None = None  # how the candidate's answer was found (`STRICT` and the fallbacks)
    # Both answers found strictly: a match may decide the item by rule (the cascade).
    strict: bool = False


NO_ANSWER = "no answer extracted"


def check_answer(candidate: str | None, reference: str | None, methods: dict | None = None) -> AnswerCheck:
    """Exact match after extraction (`methods`: {reference, candidate}, each a method of `extract`).
    Without methods: normalised exact match of the whole texts, as before extraction existed."""
    from genjudge.judging.textnorm import exact_match

    methods = methods or {}
    if is_missing(reference) or not str(reference).strip():
        return AnswerCheck(None, reason="no reference")
    if not methods.get("reference") and not methods.get("candidate"):
        return AnswerCheck(exact_match(candidate, reference), how=WHOLE_TEXT, strict=certain(candidate, reference))
    ref = extract(reference, methods.get("reference"))
    if not ref.ok:
        return AnswerCheck(None, reason=f"reference: {ref.reason}")
    cand = extract(candidate, methods.get("candidate"))
    if not cand.ok:
        return AnswerCheck(False, None, ref.value, f"{NO_ANSWER}: {cand.reason}")
    math = "boxed" in (methods.get("reference"), methods.get("candidate"))
    return AnswerCheck(
        answers_match(cand.value, ref.value, math),
        cand.value,
        ref.value,
        how=cand.how,
        strict=cand.strict and ref.strict and certain(cand.value, ref.value, math),
    )
