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

import string
import unicodedata

from genjudge.data.dataset import is_missing

_ASCII_PUNCT = frozenset(string.punctuation)
_MINUS = "-\u2212"  # ASCII hyphen-minus and the Unicode minus sign
_DROPPED_BEFORE_ANY_WORD = ("an", "the")


def _is_punct(ch: str) -> bool:
    """Punctuation (the Unicode minus too, where it is no sign: `10−5` is `10 5`, as `10-5`)."""
    return ch in _ASCII_PUNCT or ch in _MINUS or unicodedata.category(ch).startswith("P")


def _opens(ch: str) -> bool:
    """An opening bracket or quote: it may stand between an article and its word (`a “cat”`)."""
    return ch in "\"'" or unicodedata.category(ch) in ("Ps", "Pi")


def _is_sign(text: str, i: int) -> bool:
    """Whether text[i] is a minus sign of a number: before a digit (or `.digit`), not after a letter or digit."""
    if text[i] not in _MINUS or (i > 0 and text[i - 1].isalnum()):
        return False
    rest = text[i + 1 : i + 3]
    return rest[:1].isdigit() or (rest[:1] == "." and rest[1:2].isdigit())


def _words(text: str) -> list[tuple[str, bool]]:
    """The words of `text` (punctuation and spaces separate them), each with whether nothing but
    spaces and opening brackets or quotes separate it from the next word."""
    words: list[list] = []
    current: list[str] = []
    for i, ch in enumerate(text):
        if _is_sign(text, i):
            if current:
                words.append(["".join(current), True])
                current = []
            current.append("-")
        elif ch.isspace() or _is_punct(ch):
            if current:
                words.append(["".join(current), True])
                current = []
            if words and _is_punct(ch) and not _opens(ch):
                words[-1][1] = False
        else:
            current.append(ch)
    if current:
        words.append(["".join(current), True])
    return [(w, plain) for w, plain in words]


def normalise(text: str | None) -> str:
    if is_missing(text):
        return ""
    words = _words(str(text).lower())
    kept = []
    for i, (word, plain) in enumerate(words):
        after = words[i + 1][0] if i + 1 < len(words) else None
        if after is not None and (word in _DROPPED_BEFORE_ANY_WORD or (word == "a" and plain and len(after) >= 2)):
            continue
        kept.append(word)
    return " ".join(kept)


def exact_match(candidate: str | None, reference: str | None) -> bool | None:
    if is_missing(reference):
        return None
    return normalise(candidate) == normalise(reference) and normalise(reference) != ""
