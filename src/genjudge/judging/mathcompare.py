"""Mathematical answers compared by Math-Verify (Hugging Face's `math-verify`, the comparison lighteval
uses): LaTeX and plain expressions parsed with sympy, then compared as numbers, expressions, equations,
intervals, sets and tuples (docs/reference-checks.md says what it treats as equal).

- `latex_equal(candidate, reference)`: two answers written in LaTeX (the contents of `\\boxed{}`),
  each parsed as Math-Verify parses a `\\boxed{}` answer; `reference` is its gold side (the comparison
  is not symmetric: `y=2x+3` as the reference equals a candidate `2x+3`, not the other way round).
- `latex_certain(candidate, reference)`: whether such a match holds exactly, each decimal read as the
  exact number it writes (`1.414214` matches `\\sqrt{2}` to 6 decimal places, uncertainly).
- `numbers_equal(candidate, reference)`: two numbers already read by `extraction.parse_number`, given to
  Math-Verify as it builds them itself: written with a decimal point, a float (compared to 6 decimal
  places, so `0.333333` equals `1/3`); otherwise an exact rational.

Math-Verify times a parse out with SIGALRM, which only the main thread may set: off the main thread
the comparison runs without its timeout.
"""

from __future__ import annotations

import logging
import threading
from fractions import Fraction
from functools import lru_cache

from genjudge.judging.numberforms import for_math_verify

TIMEOUT_SECONDS = 5
# Math-Verify warns once that a timeout is off, and logs what it could not parse at debug level.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def _timeout() -> int | None:
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


@lru_cache(maxsize=4096)
def parse_latex(text: str) -> tuple:
    """Math-Verify's parse of one LaTeX answer: (sympy object, its normalised LaTeX), the string alone
    where sympy could not read it, or () where nothing was found. LaTeX's thousands separators and per
    cent signs are dropped first (`numberforms.for_math_verify`); digits a LaTeX space joins otherwise
    (`12\\,50`) are the string alone: equal only to the same text."""
    from math_verify import LatexExtractionConfig, parse

    plain = for_math_verify(text)
    if plain is None:
        return (text,)
    return tuple(
        parse(f"\\boxed{{{plain}}}", [LatexExtractionConfig(boxed_match_priority=0)], parsing_timeout=_timeout())
    )


def _verify(gold, target, numeric_precision: int = 15) -> bool:
    from math_verify import verify

    return bool(verify(list(gold), list(target), numeric_precision=numeric_precision, timeout_seconds=_timeout()))


def latex_equal(candidate: str, reference: str) -> bool:
    return _verify(parse_latex(reference), parse_latex(candidate))


# Digits to which the exact comparison evaluates what sympy cannot simplify: far beyond a decimal written
# in an answer, so that 0.785398163397448 is not pi/4.
EXACT_DIGITS = 50


def _exact(parsed):
    """The parse with every float replaced by the exact number its decimal digits write (`0.333333` by
    333333/1000000); None where that cannot be done (the match then stays uncertain)."""
    import sympy

    if isinstance(parsed, str):
        return parsed
    try:
        return parsed.xreplace({f: sympy.Rational(str(f)) for f in parsed.atoms(sympy.Float)})
    except (AttributeError, TypeError, ValueError):
        return None


def latex_certain(candidate: str, reference: str) -> bool:
    """Whether two answers are equal without Math-Verify's numeric tolerance: equal with every decimal
    read as the exact number it writes. `0.5` and `\\frac{1}{2}`, `0.75\\pi` and `\\frac{3\\pi}{4}` are;
    `1.414214` and `\\sqrt{2}`, `0.333333` and `\\frac{1}{3}` (equal to 6 decimal places) are not."""
    gold, target = [_exact(p) for p in parse_latex(reference)], [_exact(p) for p in parse_latex(candidate)]
    if None in gold or None in target:
        return False
    return _verify(gold, target, numeric_precision=EXACT_DIGITS)


def sympy_number(value: Fraction, decimal: bool):
    """The number as Math-Verify's own parser builds it: a float where it was written with a decimal
    point (`Number("0.5")`), else exact."""
    import sympy

    exact = sympy.Rational(value.numerator, value.denominator)
    return sympy.Float(exact, 15) if decimal else exact


def numbers_equal(candidate: tuple[Fraction, bool], reference: tuple[Fraction, bool]) -> bool:
    """Each side is (value, written as a decimal)."""
    return _verify([sympy_number(*reference)], [sympy_number(*candidate)])
