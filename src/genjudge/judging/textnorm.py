"""Normalised exact match (SQuAD-style): case, punctuation, articles and spacing ignored.

- Punctuation is any ASCII punctuation character (`string.punctuation`) and any Unicode one
  (categories P*: `“A”`, `A。`, `（A）` all normalise to `a`).
- A minus sign (`-` or the Unicode minus `−`) right before a digit, and not after a letter or
  digit, is kept as `-`: `-5` never equals `5`, `-5` equals `−5` (`10-5` is still `10 5`).
- An article is dropped only where it stands before the word it introduces: `the` and `an` before
  any next word, `a` before a next word of two or more characters with nothing but spaces (and
  opening brackets or quotes) between. So a choice letter keeps its letter wherever it is one:
  `A`, `A.`, `A, C`, `A/B`, `A B`, `A) Paris` keep it (`A, C` never equals `C`), `A cat` and
  `the Eiffel Tower` drop it. The last word is never dropped, so a text that is nothing but an
  article keeps it (`A` matches `A` and not `""`, which matches nothing).
"""

from __future__ import annotations

import re
import string
import unicodedata

from genjudge.data.dataset import is_missing

_ASCII_PUNCT = frozenset(string.punctuation)
_MINUS = "-\u2212"  # ASCII hyphen-minus and the Unicode minus sign


def _is_punct(ch: str) -> bool:
    """Punctuation (the Unicode minus too, where it is no sign: `10−5` is `10 5`, as `10-5`)."""
    return ch in _ASCII_PUNCT or ch in _MINUS or unicodedata.category(ch).startswith("P")


def _opens(ch: str) -> bool:
    """An opening bracket or quote: it may stand between an article and its word (`a “cat”`)."""
    return ch in "\"'" or unicodedata.category(ch) in ("Ps", "Pi")


# A minus sign of a number: before a digit (or `.digit`), not after a letter or digit. Marked \x01
# (a word character) after a space, so that it starts a word of its own.
_SIGN = re.compile(r"(?<![^\W_])[-\u2212](?=\.?\d)")
# After punctuation became \x00 (a break) or a space (an opening bracket or quote): `the`/`an` before
# any next word, `a` before a next word of two or more characters with nothing but spaces between.
_ARTICLE = re.compile(r"(?<![^\s\x00])(?:(?:the|an)(?=[\s\x00]+[^\s\x00])|a(?=\s+[^\s\x00]{2}))")
_WORD = re.compile(r"[^\s\x00]+")


class _Classes(dict):
    """str.translate's table, filled as characters are met: punctuation to a break (\x00), an opening
    bracket or quote to a space, anything else to itself (C-speed lookups after the first)."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        out = (" " if _opens(ch) else "\x00") if _is_punct(ch) else ch
        self[code] = out
        return out


_CLASSES = _Classes()


def normalise(text: str | None) -> str:
    if is_missing(text):
        return ""
    text = str(text).lower()
    held = {}
    if "\x00" in text or "\x01" in text:  # the markers, as word characters of the text: held apart
        spare = [c for c in map(chr, range(0xFDD0, 0xFDF0)) if c not in text]  # noncharacters
        for marker, stand_in in zip("\x00\x01", spare):
            text, held[stand_in] = text.replace(marker, stand_in), marker
    marked = _SIGN.sub(" \x01", text).translate(_CLASSES)
    out = " ".join(_WORD.findall(_ARTICLE.sub("", marked))).replace("\x01", "-")
    for stand_in, marker in held.items():
        out = out.replace(stand_in, marker)
    return out


def exact_match(candidate: str | None, reference: str | None) -> bool | None:
    if is_missing(reference):
        return None
    return normalise(candidate) == normalise(reference) and normalise(reference) != ""
