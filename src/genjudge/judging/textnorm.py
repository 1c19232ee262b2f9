"""Normalised exact match of plain text (SQuAD-style): case, punctuation, articles and spacing ignored.

Mathematical answers are compared by Math-Verify (`judging/mathcompare.py`), never here; so that a
formula compared as text is never equal to another one, the characters that change a formula's
meaning are kept as written, never word breaks:

- Kept: `+ - ^ _ ( ) [ ] { } = < > \\` and the Unicode minus sign `−` (written `-`): `y=2x+3` is not
  `y=2x-3`, `(1,2)` is not `[1,2]`, `x^2` is not `x_2`, `-5` is not `5`, `10-5` is not `10 5`.
- Punctuation is any other ASCII punctuation character (`string.punctuation`) and any Unicode one
  (categories P*: `“A”`, `A。`, `（A）` all normalise to `a`).
- An article is dropped only where it stands before the word it introduces: `the` and `an` before
  any next word, `a` before a next word of two or more characters with nothing but spaces (and
  opening quotes) between. So a choice letter keeps its letter wherever it is one:
  `A`, `A.`, `A, C`, `A/B`, `A B`, `A) Paris` keep it (`A, C` never equals `C`), `A cat` and
  `the Eiffel Tower` drop it. The last word is never dropped, so a text that is nothing but an
  article keeps it (`A` matches `A` and not `""`, which matches nothing).
"""

from __future__ import annotations

import re
import string
import unicodedata

from genjudge.data.dataset import is_missing

# Characters that change what a formula means: kept as written, never a word break.
KEPT = frozenset("+-^_()[]{}=<>\\")
_ASCII_PUNCT = frozenset(string.punctuation) - KEPT


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or (ch not in KEPT and unicodedata.category(ch).startswith("P"))


def _opens(ch: str) -> bool:
    """An opening bracket or quote: it may stand between an article and its word (`a “cat”`)."""
    return ch in "\"'" or unicodedata.category(ch) in ("Ps", "Pi")


# After punctuation became \x00 (a break) or a space (an opening quote): `the`/`an` before any next
# word, `a` before a next word of two or more characters with nothing but spaces between.
_ARTICLE = re.compile(r"(?<![^\s\x00])(?:(?:the|an)(?=[\s\x00]+[^\s\x00])|a(?=\s+[^\s\x00]{2}))")
_WORD = re.compile(r"[^\s\x00]+")


class _Classes(dict):
    """str.translate's table, filled as characters are met: punctuation to a break (\x00), an opening
    bracket or quote to a space, the Unicode minus to `-`, anything else to itself (C-speed lookups
    after the first)."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        out = "-" if ch == "\u2212" else (" " if _opens(ch) else "\x00") if _is_punct(ch) else ch
        self[code] = out
        return out


_CLASSES = _Classes()


def normalise(text: str | None) -> str:
    if is_missing(text):
        return ""
    text = str(text).lower()
    held = None
    if "\x00" in text:  # the marker, as a word character of the text: held apart
        held = next(c for c in map(chr, range(0xFDD0, 0xFDF0)) if c not in text)  # a noncharacter
        text = text.replace("\x00", held)
    out = " ".join(_WORD.findall(_ARTICLE.sub("", text.translate(_CLASSES))))
    return out if held is None else out.replace(held, "\x00")


def dropped(text: str | None) -> list[str]:
    """The punctuation `normalise` drops from `text`, in order, a final full stop aside: two texts
    that normalise alike but drop different punctuation (`2/3` and `2.3`, `n!` and `n`, `|x|` and
    `x`) may mean different things, so their match is not certain."""
    if is_missing(text):
        return []
    t = str(text).strip()
    t = t[:-1] if t.endswith(".") else t
    return [ch for ch in t if _is_punct(ch)]


def exact_match(candidate: str | None, reference: str | None) -> bool | None:
    if is_missing(reference):
        return None
    return normalise(candidate) == normalise(reference) and normalise(reference) != ""
