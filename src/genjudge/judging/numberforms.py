"""Numbers as replies write them: one token pattern (`TOKEN`) for every shape `last_number` reads, and
its exact value (`parse_number`), the text extraction returns (`token_text`) and the value Math-Verify
is given (`math_number`). config/README.md has the table of shapes."""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

from genjudge.data.dataset import is_missing

# A number as written. Its digits are read as one run of digits, commas and points (so that
# `1,2,3` is one list, never `2,3`), then interpreted by `_run_value`.
_VULGAR = "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅐⅛⅜⅝⅞⅑⅒"  # vulgar fractions: unicodedata.numeric gives their value
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_MINUS = "-\u2212"  # ASCII hyphen-minus and the Unicode minus sign
MINUS_CLASS = r"\-\u2212"  # the same inside a character class
_SPACES = " \u00a0\u2009\u202f"  # a space, no-break space, thin space, narrow no-break space
# LaTeX between digits: a comma in braces or before a negative thin space (MATH's `10{,}000`,
# `10,\!000`) reads as a comma; a thin, medium, thick or negative thin space or a control space
# (`\,`, `\:`, `\;`, `\!`, `\ `) as a space. The rules for commas and spaces then apply.
_TEX_COMMA = r"(?:\{,\}(?:\\!)?|,\\!)"
_TEX_SPACE = r"\\[,:; !]"
_GROUP_SPACE = rf"(?:[{_SPACES}]|{_TEX_SPACE})"
TOKEN = re.compile(
    # A sign only where it cannot be a hyphen or a subtraction (not after a letter, digit or ")").
    rf"(?:(?<![\w)])(?P<sign>[+{MINUS_CLASS}]))?[$€£]?(?<![\w.])(?P<n>"
    r"(?:(?P<whole>\d+) (?P<mnum>\d+)/(?P<mden>\d+)(?![\d/])"  # a mixed number: 2 1/2
    r"|(?<!/)(?P<num>\d+)/(?P<den>\d+)(?![\d/])"  # a fraction, not a date's 12/25/2023
    r"|\\[dt]?frac\s*\{\s*(?P<fnum>\d+)\s*\}\s*\{\s*(?P<fden>\d+)\s*\}"  # \frac{1}{2}, \dfrac, \tfrac
    rf"|(?:(?P<vwhole>\d+)\s?)?(?P<vulgar>[{_VULGAR}])"  # 2½, ¾
    r"|(?P<swiss>[1-9]\d{0,2}(?:['\u2019]\d{3})+(?:\.\d+)?)(?![\d'\u2019])"  # 1'000 (Swiss grouping)
    # groups of exactly three digits after a space (no-break, thin, LaTeX's) and 1-3 digits: 1 234,50,
    # 12 500, 2\,500
    rf"|(?P<spaced>[1-9]\d{{0,2}}(?:{_GROUP_SPACE}\d{{3}})+(?![\d/])(?!{_TEX_SPACE}\d)(?:[.,]\d+)?)(?![.,]?\d)"
    # digits LaTeX spaces join into no groups of thousands (12\,50): no number, never a fragment
    rf"|(?P<texjoined>\d+(?:{_TEX_SPACE}\d+)+)"
    rf"|(?P<run>\d(?:{_TEX_COMMA}|[\d,.])*\d|\d|\.\d+))"
    # an exponent: 1.5e3, 2E-4, 1.5 × 10^3, 1.5 \times 10^{3}
    rf"(?:(?P<e>[eE][+{MINUS_CLASS}]?\d+)"
    r"|\s*(?:×|x|\*|\\times|\\cdot)\s*10\s*(?:(?:\^|\*\*)\s*"
    rf"(?P<brace>\{{)?(?P<p>[+{MINUS_CLASS}]?\d+)(?(brace)\}})(?![\d.]\d)"
    rf"|(?P<sup>[⁺⁻]?[{_SUPERSCRIPTS}]+)))?)"  # 3.0×10⁸
    # a per cent sign, dropped: 25% and 25\% are 25
    rf"(?:(?:\s|{_TEX_SPACE})?\\?%)?"
)
_PLAIN = re.compile(r"\d+(?:\.\d+)?|\.\d+")
# A leading group of thousands is 1-3 digits and never starts with 0: `0,125` is a decimal.
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
# Points grouping thousands: before a decimal comma (1.234,50), or two groups and more (1.234.567).
_POINT_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:\.\d{3})+,\d+|[1-9]\d{0,2}(?:\.\d{3}){2,}")
_DECIMAL_COMMA = re.compile(r"\d+,\d+")  # one comma that groups no thousands
# Indian grouping: groups of two digits before the last group of three (1,23,456 and 12,34,56,789).
_INDIAN = re.compile(r"[1-9]\d?(?:,\d{2})+,\d{3}(?:\.\d+)?")
_GROUP_OF_THREE = re.compile(r"\d{3}(?:\.\d*)?")
_SPACE = re.compile(_GROUP_SPACE)
_TEX_COMMA_RX = re.compile(_TEX_COMMA)
_APOSTROPHE = re.compile("['\u2019]")
_LEADING_SIGNS = re.compile(rf"([+{MINUS_CLASS}]?)\s*([$€£]?)\s*([+{MINUS_CLASS}]?)\s*")
# In an expression for Math-Verify, which reads `2\\,500` as 502 and `10\\,000` as 0: groups of exactly
# three digits that LaTeX separates, after one to three digits not starting with 0, group thousands.
_TEX_SEPARATOR = rf"(?:{_TEX_COMMA}|{_TEX_SPACE})"
_TEX_THOUSANDS = re.compile(rf"(?<![\d.])[1-9]\d{{0,2}}(?:{_TEX_SEPARATOR}\d{{3}})+(?!\d)(?!{_TEX_SEPARATOR}\d)")
_TEX_SEPARATOR_RX = re.compile(_TEX_SEPARATOR)
_TEX_JOINED = re.compile(rf"\d{_TEX_SPACE}\d")
_PER_CENT = re.compile(rf"(?<=\d)(?:\s|{_TEX_SPACE})*(?:\\?%|(?:\\text\{{\s*)?per\s?cent\b\}}?)")
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


def _run(m: re.Match) -> str | None:
    """The token's run of digits, commas and points, LaTeX's commas (`{,}`, `,\\!`) written `,`."""
    run = m.group("run")
    return None if run is None else _TEX_COMMA_RX.sub(",", run)


def _malformed(run: str) -> bool:
    """Two or more commas, a group of three digits among them, and no grouping of thousands that
    fits (`10,000,00`, `1,000,2`): a number grouped wrongly, not a list; no number is read from it."""
    groups = run.split(",")
    return len(groups) > 2 and _run_value(run) is None and any(_GROUP_OF_THREE.fullmatch(g) for g in groups[1:])


_FROM_SUPERSCRIPT = str.maketrans(_SUPERSCRIPTS + "⁺⁻", "0123456789+-")


def _vulgar_value(ch: str) -> Fraction:
    """½ is 1/2, ⅞ is 7/8 (exact: from the fraction's decomposition, 1⁄2)."""
    num, den = unicodedata.normalize("NFKD", ch).split("\u2044")
    return Fraction(int(num), int(den))


def _spaced_value(spaced: str) -> Fraction:
    """`1 234,50`, `12 500`, `1 000 000.5`: spaces (any of `_SPACES`) group thousands."""
    return Fraction(_SPACE.sub("", spaced).replace(",", "."))


def token_value(m: re.Match) -> Fraction | None:
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
            value = Fraction(_APOSTROPHE.sub("", m.group("swiss")))
        elif m.group("spaced") is not None:
            value = _spaced_value(m.group("spaced"))
        elif m.group("texjoined") is not None:
            return None
        else:
            value = _run_value(_run(m))
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


def token_text(m: re.Match) -> str | None:
    """The number as extracted: its sign (as `-`), digits and exponent, without the currency and
    per cent signs; of a list (`1,2,3`) or a section number (`1.2.3`), its last number, unsigned;
    None for a number grouped wrongly (`10,000,00`, `12\\,50`): no fragment of it is a number it means."""
    if m.group("texjoined") is not None:
        return None
    run = _run(m)
    if run is not None and _malformed(run):
        return None
    if run is not None and _run_value(run) is None:  # a list (1,2,3) or a section number (1.2.3)
        last = run.rsplit(",", 1)[-1]
        return last if _PLAIN.fullmatch(last) else last.rsplit(".", 1)[-1]
    return ("-" if m.group("sign") and m.group("sign") in _MINUS else "") + m.group("n")


def leading_signs(text: str) -> str:
    """`- $ 5` and `$-5` as `-$5`: spaces after a leading sign or currency sign dropped."""
    m = _LEADING_SIGNS.match(text)
    if m.group(1) and m.group(3):
        return text  # two signs: not a number
    return (m.group(1) or m.group(3)) + m.group(2) + text[m.end() :]


def number_token(value: str | None) -> re.Match | None:
    if is_missing(value):
        return None
    text = str(value).strip()
    text = text[:-1].rstrip() if text.endswith(".") else text
    return TOKEN.fullmatch(leading_signs(text))


def parse_number(value: str | None) -> Fraction | None:
    """The exact value of a number in any shape `last_number` reads (`1,000`, `1,23,456`,
    `12 500`, `1 234,50`, `1'000`, `-3.5`, `$18`, `50%`, `12,50`, `1/2`, `2 1/2`, `2½`, `\\frac{1}{2}`,
    `1.5e3`, `3.0×10⁸`); a trailing full stop is ignored. None when `value` is not just one number
    (`1,2,3` is a list)."""
    m = number_token(value)
    return token_value(m) if m else None


def math_number(value: str | None, boxed: bool = False) -> tuple[Fraction, bool] | None:
    """(value, written as a decimal) of one number, for Math-Verify: a fraction (`1/2`, `\\frac{1}{2}`,
    `2½`) and a power of ten (`1.5e-7`, `1.5\\times10^{-7}`, as Math-Verify keeps `1.5/10**7`) are
    exact, another non-integer written with decimals (`0.5`, `12,50`) a float. In a box (`boxed`), a
    comma that groups no thousands separates a list (`\\boxed{1,5}`: the set {1, 5}, as MATH writes
    several answers), never a decimal comma: no number."""
    m = number_token(value)
    number = token_value(m) if m else None
    if number is None:
        return None
    run = _run(m)
    if boxed and run and "," in run and not any(rx.fullmatch(run) for rx in (_THOUSANDS, _INDIAN, _POINT_THOUSANDS)):
        return None
    exact = any(m.group(g) is not None for g in ("num", "whole", "fnum", "vulgar", "e", "p", "sup"))
    return number, number.denominator != 1 and not exact


def for_math_verify(latex: str) -> str | None:
    """`latex` as Math-Verify is to parse it, or None where it holds digits grouped in no known way.

    - LaTeX's thousands separators are dropped (`2\\,500`, `10{,}000`, `1,\\!000` as `2500`, `10000`,
      `1000`); where a LaTeX space still joins two digits (`12\\,50`), None: never read as arithmetic.
      `{,}` before other groups is left a comma (`3{,}14`: a list in a box, as `3,14`).
    - A per cent sign or word after a number is dropped (`50\\%`, `50%`, `50 \\%`, `50 percent` as
      `50`): a per cent is its number, as `last_number` reads it, never its value 0.5."""
    out = _TEX_THOUSANDS.sub(lambda m: _TEX_SEPARATOR_RX.sub("", m.group()), latex)
    if _TEX_JOINED.search(out):
        return None
    return _PER_CENT.sub("", out)
