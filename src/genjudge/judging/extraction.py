"""Answer extraction before exact match: the final answer out of a worked solution or a reply.

`extract(text, method)` returns an `Extracted`: the value found, or None with the reason
nothing was found; a failed extraction is never a guess. Methods:

- `gsm8k`: the number after the last `####` (GSM8K's references end in `#### 72`);
- `last_number`: the last number in the text that it does not set aside (`6, not 5` reads 6), in any shape of `_TOKEN`: `1,000` (a comma before
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
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from genjudge.data.dataset import is_missing
from genjudge.judging.textnorm import dropped, normalise

BUILTINS = ("gsm8k", "last_number", "boxed", "choice")


@dataclass(frozen=True)
class Extracted:
    value: str | None  # the extracted answer, or None
    reason: str | None  # why nothing was extracted (None when a value was)
    # How the value was found (`STRICT` or `FALLBACK` names); strict: in the format the prompt asked for,
    # one candidate, nothing taken back or rejected. Only a strict extraction lets the cascade decide.
    how: str | None = field(default=None, compare=False)
    strict: bool = field(default=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.value is not None


def _none(reason: str) -> Extracted:
    return Extracted(None, reason)


def _found(value: str, how: str, strict: bool) -> Extracted:
    return Extracted(value, None, how, strict)


# How an answer was found. Strict ones (the format a prompt asks for) may decide an item by rule.
WHOLE_TEXT = "whole text"
MARKER = "#### n"
BOXED = "\\boxed{}"
STATED = "the answer is X"
PATTERN = "pattern"
STRICT = (WHOLE_TEXT, MARKER, BOXED, STATED, PATTERN)
# Fallback heuristics: exact match may use them, the cascade never does.
LAST_NUMBER = "last number in the text"
LAST_LINE = "a last line that is the letter"
MARKED = "the one marked letter"
MENTIONED = "the one letter mentioned"
RETRACTED = "the letter after a retraction"


# A number as written. Its digits are read as one run of digits, commas and points (so that
# `1,2,3` is one list, never `2,3`), then interpreted by `_run_value`.
_VULGAR = "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅐⅛⅜⅝⅞⅑⅒"  # vulgar fractions: unicodedata.numeric gives their value
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_MINUS = "-\u2212"  # ASCII hyphen-minus and the Unicode minus sign
_MINUS_CLASS = r"\-\u2212"  # the same inside a character class
_SPACES = " \u00a0\u2009\u202f"  # a space, no-break space, thin space, narrow no-break space
_TOKEN = re.compile(
    # A sign only where it cannot be a hyphen or a subtraction (not after a letter, digit or ")").
    rf"(?:(?<![\w)])(?P<sign>[+{_MINUS_CLASS}]))?[$€£]?(?<![\w.])(?P<n>"
    r"(?:(?P<whole>\d+) (?P<mnum>\d+)/(?P<mden>\d+)(?![\d/])"  # a mixed number: 2 1/2
    r"|(?<!/)(?P<num>\d+)/(?P<den>\d+)(?![\d/])"  # a fraction, not a date's 12/25/2023
    r"|\\[dt]?frac\s*\{\s*(?P<fnum>\d+)\s*\}\s*\{\s*(?P<fden>\d+)\s*\}"  # \frac{1}{2}, \dfrac, \tfrac
    rf"|(?:(?P<vwhole>\d+)\s?)?(?P<vulgar>[{_VULGAR}])"  # 2½, ¾
    r"|(?P<swiss>[1-9]\d{0,2}(?:['\u2019]\d{3})+(?:\.\d+)?)(?![\d'\u2019])"  # 1'000 (Swiss grouping)
    # groups of exactly three digits after a space (no-break, thin) and 1-3 digits: 1 234,50, 12 500
    rf"|(?P<spaced>[1-9]\d{{0,2}}(?:[{_SPACES}]\d{{3}})+(?![\d/])(?:[.,]\d+)?)(?![.,]?\d)"
    r"|(?P<run>\d[\d,.]*\d|\d|\.\d+))"
    # an exponent: 1.5e3, 2E-4, 1.5 × 10^3, 1.5 \times 10^{3}
    rf"(?:(?P<e>[eE][+{_MINUS_CLASS}]?\d+)"
    r"|\s*(?:×|x|\*|\\times|\\cdot)\s*10\s*(?:(?:\^|\*\*)\s*"
    rf"(?P<brace>\{{)?(?P<p>[+{_MINUS_CLASS}]?\d+)(?(brace)\}})(?![\d.]\d)"
    rf"|(?P<sup>[⁺⁻]?[{_SUPERSCRIPTS}]+)))?)"  # 3.0×10⁸
    r"(?:\s?%)?"
)
_PLAIN = re.compile(r"\d+(?:\.\d+)?|\.\d+")
# A leading group of thousands is 1-3 digits and never starts with 0: `0,125` is a decimal.
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
# Points grouping thousands: before a decimal comma (1.234,50), or two groups and more (1.234.567).
_POINT_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:\.\d{3})+,\d+|[1-9]\d{0,2}(?:\.\d{3}){2,}")
_DECIMAL_COMMA = re.compile(r"\d+,\d+")  # one comma that groups no thousands
# Indian grouping: groups of two digits before the last group of three (1,23,456 and 12,34,56,789).
_INDIAN = re.compile(r"[1-9]\d?(?:,\d{2})+,\d{3}(?:\.\d+)?")
_MAX_EXPONENT = 400  # beyond any float; a bigger power is not read as a number


def _run_value(run: str) -> Fraction | None:
    """The value of a run of digits, commas and points, or None when it is a list (`1,2,3`).

    `1,000` and `1,234.50` group thousands (commas before groups of three digits, after a
    leading group of one to three digits not starting with 0); `1.234,50` and `1.234.567` group
    them with points; `1,23,456` is Indian grouping (groups of two digits before the last three);
    `12,50`, `3,5`, `0,125` and `2,3456` have a decimal comma (any other single comma); `1000` and
    `3.14` are plain."""
    if _PLAIN.fullmatch(run) or _THOUSANDS.fullmatch(run) or _INDIAN.fullmatch(run):
        return Fraction(run.replace(",", ""))
    if _POINT_THOUSANDS.fullmatch(run):
        return Fraction(run.replace(".", "").replace(",", "."))
    if _DECIMAL_COMMA.fullmatch(run):
        return Fraction(run.replace(",", "."))
    return None


def _malformed(run: str) -> bool:
    """Two or more commas, a group of three digits among them, and no grouping of thousands that
    fits (`10,000,00`, `1,000,2`): a number grouped wrongly, not a list; no number is read from it."""
    groups = run.split(",")
    return len(groups) > 2 and _run_value(run) is None and any(re.fullmatch(r"\d{3}(?:\.\d*)?", g) for g in groups[1:])


_FROM_SUPERSCRIPT = str.maketrans(_SUPERSCRIPTS + "⁺⁻", "0123456789+-")


def _vulgar_value(ch: str) -> Fraction:
    """½ is 1/2, ⅞ is 7/8 (exact: from the fraction's decomposition, 1⁄2)."""
    num, den = unicodedata.normalize("NFKD", ch).split("\u2044")
    return Fraction(int(num), int(den))


def _spaced_value(spaced: str) -> Fraction:
    """`1 234,50`, `12 500`, `1 000 000.5`: spaces (any of `_SPACES`) group thousands."""
    return Fraction(re.sub(f"[{_SPACES}]", "", spaced).replace(",", "."))


def _token_value(m: re.Match) -> Fraction | None:
    """The exact value of a number token, or None (a list, a zero denominator, a huge power)."""
    try:
        if m.group("whole") is not None:
            if int(m.group("mden")) == 0:
                return None
            value = int(m.group("whole")) + Fraction(int(m.group("mnum")), int(m.group("mden")))
        elif m.group("num") is not None:
            if int(m.group("den")) == 0:
                return None
            value = Fraction(int(m.group("num")), int(m.group("den")))
        elif m.group("fnum") is not None:
            if int(m.group("fden")) == 0:
                return None
            value = Fraction(int(m.group("fnum")), int(m.group("fden")))
        elif m.group("vulgar") is not None:
            value = int(m.group("vwhole") or 0) + _vulgar_value(m.group("vulgar"))
        elif m.group("swiss") is not None:
            value = Fraction(re.sub("['\u2019]", "", m.group("swiss")))
        elif m.group("spaced") is not None:
            value = _spaced_value(m.group("spaced"))
        else:
            value = _run_value(m.group("run"))
            if value is None:
                return None
        power = m.group("e")[1:] if m.group("e") else m.group("p")
        if m.group("sup"):
            power = m.group("sup").translate(_FROM_SUPERSCRIPT)
        if power:
            k = int(power.replace("\u2212", "-"))
            if abs(k) > _MAX_EXPONENT:
                return None
            value *= Fraction(10) ** k
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return None
    return -value if m.group("sign") and m.group("sign") in _MINUS else value


def _token_text(m: re.Match) -> str | None:
    """The number as extracted: its sign (as `-`), digits and exponent, without the currency and
    per cent signs; of a list (`1,2,3`) or a section number (`1.2.3`), its last number, unsigned;
    None for a number grouped wrongly (`10,000,00`): no fragment of it is a number it means."""
    run = m.group("run")
    if run is not None and _malformed(run):
        return None
    if run is not None and _run_value(run) is None:  # a list (1,2,3) or a section number (1.2.3)
        last = run.rsplit(",", 1)[-1]
        return last if _PLAIN.fullmatch(last) else last.rsplit(".", 1)[-1]
    return ("-" if m.group("sign") and m.group("sign") in _MINUS else "") + m.group("n")


def _snippet(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[:n] + "...")


def _leading_signs(text: str) -> str:
    """`- $ 5` and `$-5` as `-$5`: spaces after a leading sign or currency sign dropped."""
    m = re.match(rf"([+{_MINUS_CLASS}]?)\s*([$€£]?)\s*([+{_MINUS_CLASS}]?)\s*", text)
    if m.group(1) and m.group(3):
        return text  # two signs: not a number
    return (m.group(1) or m.group(3)) + m.group(2) + text[m.end() :]


# A phrase that takes an answer back ("The answer is A. Wait, no, it is C."): an answer before it
# is not certain, so it never decides an item by rule.
_RETRACTION = re.compile(
    r"(?i)\b(?:wait|actually|hold on|on second thought|correction|scratch that|i mean|oops|"
    r"let me (?:re-?check|reconsider|correct)|i made (?:a mistake|an error)|no,? (?:it|that)(?:'s|\u2019s| is| was)|"
    r"that(?:'s|\u2019s| is| was) (?:wrong|incorrect)|no,? the (?:correct |right )?answer|rather)\b"
)


def _retracted_after(text: str, at: int) -> re.Match | None:
    return _RETRACTION.search(text, at)


def _doubted(rest: str, values: set) -> bool:
    """Whether the text after an answer takes it back or gives a number other than `values`
    (`\\boxed{5}. No, the answer is 6.`, `\\boxed{5} (or possibly 6)`): the answer is then not certain."""
    return bool(_RETRACTION.search(rest)) or any(_token_value(t) not in values for t in _TOKEN.finditer(rest))


def _gsm8k(text: str) -> Extracted:
    at = text.rfind("####")
    if at < 0:
        return _none("no '####' marker")
    after = _leading_signs(text[at + 4 :].lstrip())
    m = _TOKEN.match(after)
    if not m:
        return _none(f"no number after '####' (found {_snippet(text[at + 4 :])})")
    # One candidate: every marker gives the same number, and it is one number (`1,2,3` is a list).
    values = {parse_number(_marker_text(text, i)) for i in _marker_starts(text)}
    one = len(values) == 1 and None not in values
    return _number(m, MARKER, one and not _doubted(after[m.end() :], values))


def _marker_starts(text: str) -> list[int]:
    return [m.start() for m in re.finditer("####", text)]


def _marker_text(text: str, at: int) -> str:
    m = _TOKEN.match(_leading_signs(text[at + 4 :].lstrip()))
    return m.group(0) if m else ""


def _number(m: re.Match, how: str = LAST_NUMBER, strict: bool = False) -> Extracted:
    value = _token_text(m)
    if value is None:
        return _none(f"digits grouped in no known way ({m.group('n')!r}): not read as a number")
    return _found(value, how, strict)


# A number that is part of an expression, never an answer on its own: a power's base or exponent, an
# index, a root, a LaTeX command's argument (`x^2`, `2^{10}`, `a_3`, `\\sqrt{2}`, `\\frac{x}{2}`), or
# one followed by a constant or a function (`2\\pi`, `3\\sqrt{2}`).
_WRAPPERS = r"(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|mbox|bf)"
_EXPRESSION_BEFORE = re.compile(
    rf"(?:[\^_]\s*\{{?|\}}\s*\{{|\\(?!{_WRAPPERS}\b)[a-zA-Z]+\s*(?:\[[^\]]*\]\s*)?\{{)\s*[+{_MINUS_CLASS}]?\s*$"
)
_EXPRESSION_AFTER = re.compile(
    r"\s*(?:[\^_]|\}\s*\{|\\(?:pi|sqrt|infty|frac|dfrac|tfrac|sin|cos|tan|log|ln|exp)\b|\u221a|\u03c0)"
)
# "The answer is 72", "Final answer: 72", "answer = **72**": the number a reply states.
_ANSWER_LEAD = re.compile(r"(?i:\b(?:final\s+)?answer)(?i:\s+is)?\s*[:=]?\s*(?:\*\*)?\s*(?:\$\s*)?")
_MARKER_LEAD = re.compile(r"####\s*$")
_BOXED_LEAD = re.compile(r"\\(?:boxed|fbox)\s*\{\s*$")


# A number the reply sets aside after its answer: "The answer is 6, not 5", "12 rather than 10".
_SET_ASIDE = re.compile(r"(?i)\b(?:not|rather than|instead of)\s*[$€£]?\s*$")


def _last_number(text: str) -> Extracted:
    tokens = list(_TOKEN.finditer(text))
    # The last number the reply does not set aside (`6, not 5` reads 6).
    kept = [t for t in tokens if not _SET_ASIDE.search(text, 0, t.start())]
    last = kept[-1] if kept else tokens[-1] if tokens else None
    if last is None:
        return _none("no number in the text")
    before, after = text[: last.start()], text[last.end() :]
    if _EXPRESSION_BEFORE.search(before) or _EXPRESSION_AFTER.match(after):
        around = text[max(0, last.start() - 12) : last.end() + 12]
        return _none(f"the last number is part of an expression ({_snippet(around)}): not read as a number")
    found = _number(last)
    if not found.ok:
        return found
    # Strict only where the number is the reply, or the answer it states (one value, nothing taken back).
    if not text[: last.start()].strip() and re.fullmatch(r"[\s.!*$]*", after):
        return _found(found.value, WHOLE_TEXT, True)
    if _BOXED_LEAD.search(before):
        return _found(found.value, BOXED, not _retracted_after(text, last.end()))
    if _MARKER_LEAD.search(before):
        return _gsm8k(text)
    stated = [(lead, _TOKEN.match(text, lead.end())) for lead in _ANSWER_LEAD.finditer(text)]
    stated = [t for lead, t in stated if t]
    if stated and stated[-1].start() == last.start():
        values = {parse_number(t.group(0)) for t in stated}
        one = len(values) == 1 and None not in values  # a list (`1,2,3`) is no one number
        # A number set aside after it ("6, not 5") leaves the statement read, but not certain.
        return _found(found.value, STATED, one and not _retracted_after(text, last.end()) and last is tokens[-1])
    return found


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _boxed_content(text: str, m: re.Match) -> str | None:
    """The content of the `\\boxed{` at `m`, nested braces included; None where it is never closed."""
    span = _boxed_span(text, m)
    return None if span is None else text[m.end() : span].strip()


def _boxed_span(text: str, m: re.Match) -> int | None:
    """Where the `\\boxed{` at `m` closes (the index of its `}`), or None."""
    depth, i = 1, m.end()
    while i < len(text):
        ch = text[i]
        if ch == "\\":  # an escaped brace (\{ \}) does not open or close
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _boxed(text: str) -> Extracted:
    starts = list(_BOXED.finditer(text))
    if not starts:
        return _none("no \\boxed{...}")
    content = _boxed_content(text, starts[-1])
    if content is None:
        return _none("\\boxed{ is never closed (the text may be cut off)")
    if not content:
        return _none("empty \\boxed{}")
    # One candidate: every box holds the same answer, the last is not rejected ("It is not \\boxed{5}",
    # "\\boxed{5} is wrong"), and nothing after it takes it back or gives another number.
    one = len({_boxed_content(text, m) for m in starts}) == 1
    end = _boxed_span(text, starts[-1]) + 1
    rest = text[end:]
    closing = re.match(r"\s*\$*\s*", rest)  # the math mode the box was in
    rejected = _negated(text, starts[-1].start(), starts[-1].start() + 1) or bool(
        _NEGATION_AFTER.match(rest, closing.end())
    )
    number = parse_number(content)
    doubted = _doubted(rest, {number} if number is not None else set())
    return _found(content, BOXED, one and not rejected and not doubted)


# The whole reply, or its last line, is one letter: `B`, `(c)`, `D.`, ` E) `, `**B**`.
_CHOICE_ALONE = re.compile(r"(?:\*\*)?\(?\s*([A-Ea-e])\s*\)?(?:\*\*)?[.:)]?")
# "answer is (B)", "Answer: B", "the answer is option B", "answer: **B**"; not "option B" alone,
# which a reply may mention while rejecting it. A lower-case letter only where it cannot be a
# word: bracketed ("answer is (b)"), in bold, or ending the line ("Answer: c", "answer is e.");
# "the answer is a bit ..." is the article.
_CHOICE_STATED = re.compile(
    r"(?i:\banswer)(?i:\s+is)?\s*[:=]?\s*(?i:(?:option|choice)\s+)?"
    r"(?:[(\[*]*\s*([A-E])\b(?![\w'])"
    r"|[(\[]\s*([a-e])\s*[)\]]|\*\*\s*([a-e])\s*\*\*|([a-e])(?=[.)]?[ \t]*(?:\n|$)))"
)
# \boxed{B}, \boxed{(b)}, \boxed{\text{B}}: stated as the answer too.
_CHOICE_BOXED = re.compile(
    r"\\(?:boxed|fbox)\s*\{\s*(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(?\s*([A-Ea-e])\s*\)?\s*\}?\s*\}"
)
# A stated letter that goes on into a list of letters: "answer is A and C", "Answer: (A) or (B)", "A, C".
_CHOICE_LISTED = re.compile(
    r"[ \t]*[)\]*]*[ \t]*(?:,[ \t]*(?:(?:and|or)\b)?|/|&|\b(?:and|or|nor)\b)[ \t]*(?i:(?:option|choice)\s+)?"
    r"(?:[(\[*]*[ \t]*([A-E])(?![\w'’])|[(\[][ \t]*([a-e])[ \t]*[)\]])"
    # ... and ends the statement there: "The answer is B, C is wrong" states B alone
    r"(?=[ \t]*[)\]*]*[ \t]*(?:$|[\n.,;:!?]|/|&|\b(?:and|or|nor)\b))"
)
# A letter marked as a choice: `(B)`, `B.`/`B)`/`B:` starting a line, `**B**`.
_CHOICE_MARKED = [
    re.compile(r"\(([A-E])\)"),
    re.compile(r"(?m)^[ \t>*-]*([A-E])[.):](?!\w)"),
    re.compile(r"\*\*\s*([A-E])\s*\*\*"),
]
# A capital letter A-E standing alone (not in a word, an abbreviation like U.S.A. or B.C., or `\A`).
_CHOICE_MENTIONED = re.compile(r"(?<![\w'’\\])(?<![A-Za-z]\.)([A-E])(?![\w'’])(?!\.[A-Za-z])")
# A capital letter A-E ending the reply: "... is B", "... is B." or "... is (B)".
_CHOICE_ENDING = re.compile(r"(?<![\w'’\\])\(?([A-E])\)?[.!]?[*\s]*$")
# "A" before a word is the article ("A good choice is (B)"), unless the word is one of these
# ("A or B", "A is wrong") or a single letter ("A B").
_ARTICLE_A = re.compile(
    r"A[ \t]+(?!(?:and|or|nor|not|is|was|are|were|seems|looks|also|too|only|vs|versus|but|because"
    r"|since|than|then|instead|would|could|should|might|may|must|can|will)\b)[A-Za-z]{2}"
)


# Words that reject the letter after them in their clause ("It can't be C", "The answer is not B",
# "I would not pick D", "rule out A"), and what rejects the letter before it ("C is wrong").
_NEGATION_BEFORE = re.compile(
    r"(?i)(?:\b(?:not|no|never|cannot|neither|nor|except|exclude[sd]?|eliminat\w*|rule[sd]?\s+out|"
    r"reject\w*|(?:wrong|incorrect|false)\s+(?:answers?|options?|choices?|ones?))\b|n['\u2019]t\b)"
)
_NEGATION_AFTER = re.compile(
    r"(?i)[\s)*\]]*(?:(?:is|was|are|seems|looks|would\s+be|can\s+be|could\s+be)\s+)?"
    r"(?:not\b|n['\u2019]t\b|wrong|incorrect|false|ruled\s+out|eliminated|excluded|impossible|out\b)"
)
_CLAUSE_END = re.compile(r"[.;!?\n,]|\b(?:but|and|while|whereas)\b")


def _negated(text: str, start: int, end: int) -> bool:
    """Whether the letter at text[start:end] is rejected in its clause."""
    clause = max((c.end() for c in _CLAUSE_END.finditer(text, 0, start)), default=0)
    return bool(_NEGATION_BEFORE.search(text, clause, start) or _NEGATION_AFTER.match(text, end))


def _letter(m: re.Match) -> tuple[str, int, int]:
    i = next(i for i, g in enumerate(m.groups(), 1) if g)
    return m.group(i).upper(), m.start(i), m.end(i)


def _mentioned(text: str, start: int = 0) -> list[tuple[str, bool]]:
    """Each capital letter A-E standing alone from `start` on (not the article "A"), and whether it is rejected."""
    return [
        (m.group(1), _negated(text, m.start(1), m.end(1)))
        for m in _CHOICE_MENTIONED.finditer(text, start)
        if not _ARTICLE_A.match(text, m.start())
    ]


def _one_letter(found: list[tuple[str, bool]], how: str) -> Extracted | None:
    """The one letter of `found` (several: ambiguous; only rejected ones: none), or None if there is none."""
    letters = sorted({letter for letter, _ in found})
    if len(letters) > 1:
        return _none(f"ambiguous: several choices ({', '.join(letters)}) and no 'answer is X'")
    if not letters:
        return None
    if all(rejected for _, rejected in found):
        return _none(f"the reply rejects {letters[0]} and chooses no letter")
    return _found(letters[0], how, False)


def _choice(text: str) -> Extracted:
    """One letter A-E, never a guess: the whole reply; else the last stated answer ("answer is B",
    "Answer: B", \\boxed{B}) that the reply does not reject ("I don't think the answer is A"), unless it
    names several ("answer is A and C": ambiguous), or a letter after a retraction ("The answer is A.
    Wait, no, it is C." reads C); else a last line that is the letter alone; else the one marked letter
    (`(B)`, `B)` starting a line, `**B**`; several: ambiguous); else the one capital letter the reply
    mentions standing alone (not the article "A") where it ends the reply; several mentioned:
    ambiguous. A letter the reply rejects ("It can't be C.", "not B", "I would not pick D") is never
    read. Only the whole reply and a stated answer with nothing taken back and no other letter named
    but rejected ones are strict."""
    stripped = text.strip()
    alone = _CHOICE_ALONE.fullmatch(stripped)
    if alone:
        return _found(alone.group(1).upper(), WHOLE_TEXT, True)
    stated = [
        m
        for m in sorted([*_CHOICE_STATED.finditer(text), *_CHOICE_BOXED.finditer(text)], key=lambda m: m.start())
        if not _negated(text, *_letter(m)[1:])
    ]
    if stated:
        last = stated[-1]
        letter = _letter(last)[0]
        listed = _CHOICE_LISTED.match(text, last.end()) if last.re is _CHOICE_STATED else None
        if listed:
            other = next(g for g in listed.groups() if g).upper()
            if other != letter:
                return _none(f"ambiguous: the stated answer names several choices ({letter}, {other})")
        retraction = _retracted_after(text, last.end())
        if retraction:
            later = _one_letter(_mentioned(text, retraction.end()), RETRACTED)
            if later is not None and (not later.ok or later.value != letter):
                return later
            return _found(letter, STATED, False)  # nothing else chosen after it, but not certain
        # Certain only where every other letter the reply names is rejected: "The answer is B, or
        # possibly C" and "Answer A claims ...; the correct choice is C" hedge or choose another.
        others = any(other != letter and not rejected for other, rejected in _mentioned(text))
        return _found(letter, STATED, len({_letter(m)[0] for m in stated}) == 1 and not others)
    last_line = _CHOICE_ALONE.fullmatch(stripped.rsplit("\n", 1)[-1].strip())
    if last_line:
        return _found(last_line.group(1).upper(), LAST_LINE, False)
    # A reply that marks one letter ("(B) Paris, since vitamin C ...") chose it; one marking several did not.
    marked = [(m.group(1), _negated(text, m.start(1), m.end(1))) for rx in _CHOICE_MARKED for m in rx.finditer(text)]
    one = _one_letter(marked, MARKED)
    if one is not None:
        return one
    mentioned = _mentioned(text)
    one = _one_letter(mentioned, MENTIONED)
    if one is not None and not one.ok:
        return one
    # A letter only mentioned is read where it ends the reply ("The best option is B"); one in passing
    # ("Vitamin C deficiency causes scurvy.") is no choice.
    ending = _CHOICE_ENDING.search(text)
    if one is not None and ending and ending.group(1) == one.value:
        return one
    return _none("no choice letter A-E")


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
        return _none(f"pattern {pattern!r} did not match")
    value = matches[-1].group(1).strip()
    if not value:
        return _none(f"pattern {pattern!r} matched an empty answer")
    # One candidate: every match gives the same answer.
    one = len({(m.group(1) or "").strip() for m in matches}) == 1
    return _found(value, PATTERN, one and not _retracted_after(text, matches[-1].end()))


_METHODS = {"gsm8k": _gsm8k, "last_number": _last_number, "boxed": _boxed, "choice": _choice}


def extract(text: str | None, method: str | None) -> Extracted:
    """The answer in `text` by `method`; value None with a reason when there is none.
    An invalid regex method raises ValueError (check it while planning with `check_method`)."""
    if method is not None and method not in _METHODS:
        _compile(method)  # a bad pattern is a configuration error even for an empty text
    if is_missing(text) or not str(text).strip():
        return _none("empty text")
    text = str(text)
    if method is None:
        return _found(text.strip(), WHOLE_TEXT, True)
    if method in _METHODS:
        return _METHODS[method](text)
    return _pattern(text, method)


def _number_token(value: str | None) -> re.Match | None:
    if is_missing(value):
        return None
    text = str(value).strip()
    text = text[:-1].rstrip() if text.endswith(".") else text
    return _TOKEN.fullmatch(_leading_signs(text))


def parse_number(value: str | None) -> Fraction | None:
    """The exact value of a number in any shape `last_number` reads (`1,000`, `1,23,456`,
    `12 500`, `1 234,50`, `1'000`, `-3.5`, `$18`, `50%`, `12,50`, `1/2`, `2 1/2`, `2½`, `\\frac{1}{2}`,
    `1.5e3`, `3.0×10⁸`); a trailing full stop is ignored. None when `value` is not just one number
    (`1,2,3` is a list)."""
    m = _number_token(value)
    return _token_value(m) if m else None


def _math_number(value: str | None, boxed: bool = False) -> tuple[Fraction, bool] | None:
    """(value, written as a decimal) of one number, for Math-Verify: a fraction (`1/2`, `\\frac{1}{2}`,
    `2½`) and a power of ten (`1.5e-7`, `1.5\\times10^{-7}`, as Math-Verify keeps `1.5/10**7`) are
    exact, another non-integer written with decimals (`0.5`, `12,50`) a float. In a box (`boxed`), a
    comma that groups no thousands separates a list (`\\boxed{1,5}`: the set {1, 5}, as MATH writes
    several answers), never a decimal comma: no number."""
    m = _number_token(value)
    number = _token_value(m) if m else None
    if number is None:
        return None
    run = m.group("run")
    if boxed and run and "," in run and not any(rx.fullmatch(run) for rx in (_THOUSANDS, _INDIAN, _POINT_THOUSANDS)):
        return None
    exact = any(m.group(g) is not None for g in ("num", "whole", "fnum", "vulgar", "e", "p", "sup"))
    return number, number.denominator != 1 and not exact


def answers_match(candidate: str | None, reference: str | None, math: bool = False) -> bool:
    """Whether two extracted answers agree. Two numbers: by Math-Verify's rule (exact, or to 6 decimal
    places where one is written with decimals); with `math` (a `\\boxed{}` answer) anything else is
    compared by Math-Verify as LaTeX (`mathcompare`); otherwise a number never matches a non-number
    (`-5` against `5 apples` is False) and other text is compared after `textnorm.normalise`.
    Missing never matches."""
    from genjudge.judging import mathcompare

    if candidate is None or reference is None:
        return False
    a, b = _math_number(candidate, math), _math_number(reference, math)
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
    two numbers equal exactly, not only to Math-Verify's 6 decimal places (`0.333333` and `1/3`,
    `0.0000002` and `-0.0000004` match, uncertainly); two texts that drop the same punctuation
    (`textnorm.dropped`: not `2/3` and `2.3`). Math-Verify's other comparisons (`math`) are its own."""
    a, b = _math_number(candidate, math), _math_number(reference, math)
    if a is not None and b is not None:
        return a[0] == b[0]
    if math:
        return True
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
