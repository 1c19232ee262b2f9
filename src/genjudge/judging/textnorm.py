"""Normalised exact match (SQuAD-style): case, punctuation, articles and spacing ignored.

An article is dropped only beside other words: a text that is nothing but an article (the choice
letter "A") keeps it, so "A" matches "A" and not "" (which matches nothing)."""

from __future__ import annotations

import re
import string

from genjudge.data.dataset import is_missing

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise(text: str | None) -> str:
    if is_missing(text):
        return ""
    text = text.lower()
    text = _PUNCT.sub(" ", text)
    words = _ARTICLES.sub(" ", text).split()
    return " ".join(words or text.split())


def exact_match(candidate: str | None, reference: str | None) -> bool | None:
    if is_missing(reference):
        return None
    return normalise(candidate) == normalise(reference) and normalise(reference) != ""
