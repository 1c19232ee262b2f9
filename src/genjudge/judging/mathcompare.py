"""Mathematical answers compared by Math-Verify (Hugging Face's `math-verify`, the comparison lighteval
uses): LaTeX and plain expressions parsed with sympy, then compared as numbers, expressions, equations,
intervals, sets and tuples (docs/reference-checks.md says what it treats as equal).

- `latex_equal(candidate, reference)`: two answers written in LaTeX (the contents of `\\boxed{}`),
  each parsed as Math-Verify parses a `\\boxed{}` answer; `reference` is its gold side (the comparison
  is not symmetric: `y=2x+3` as the reference equals a candidate `2x+3`, not the other way round).
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


def _verify(gold, target) -> bool:
    from math_verify import verify

    return bool(verify(list(gold), list(target), timeout_seconds=_timeout()))


def latex_equal(candidate: str, reference: str) -> bool:
    return _verify(parse_latex(reference), parse_latex(candidate))


def sympy_number(value: Fraction, decimal: bool):
    """The number as Math-Verify's own parser builds it: a float where it was written with a decimal
    point (`Number("0.5")`), else exact."""
    import sympy

    exact = sympy.Rational(value.numerator, value.denominator)
    return sympy.Float(exact, 15) if decimal else exact


def numbers_equal(candidate: tuple[Fraction, bool], reference: tuple[Fraction, bool]) -> bool:
    """Each side is (value, written as a decimal)."""
    return _verify([sympy_number(*reference)], [sympy_number(*candidate)])
