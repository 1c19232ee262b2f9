"""What an answer extraction returns, how the answer was found, and the phrases that take an answer back
or reject it: shared by the extraction methods (`extraction`, `choice`)."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field


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


def not_found(reason: str) -> Extracted:
    return Extracted(None, reason)


def found_as(value: str, how: str, strict: bool) -> Extracted:
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


# A phrase that takes an answer back ("The answer is A. Wait, no, it is C."): an answer before it
# is not certain, so it never decides an item by rule.
RETRACTION = re.compile(
    r"(?i)\b(?:wait|actually|hold on|on second thought|correction|scratch that|i mean|oops|"
    r"let me (?:re-?check|reconsider|correct)|i made (?:a mistake|an error)|no,? (?:it|that)(?:'s|\u2019s| is| was)|"
    r"that(?:'s|\u2019s| is| was) (?:wrong|incorrect)|no,? the (?:correct |right )?answer|rather)\b"
)


def retracted_after(text: str, at: int) -> re.Match | None:
    return RETRACTION.search(text, at)


# Words that reject the letter after them in their clause ("It can't be C", "The answer is not B",
# "I would not pick D", "rule out A"), and what rejects the letter before it ("C is wrong").
_NEGATION_BEFORE = re.compile(
    r"(?i)(?:\b(?:not|no|never|cannot|neither|nor|except|exclude[sd]?|eliminat\w*|rule[sd]?\s+out|"
    r"reject\w*|(?:wrong|incorrect|false)\s+(?:answers?|options?|choices?|ones?))\b|n['\u2019]t\b)"
)
NEGATION_AFTER = re.compile(
    r"(?i)[\s)*\]]*(?:(?:is|was|are|seems|looks|would\s+be|can\s+be|could\s+be)\s+)?"
    r"(?:not\b|n['\u2019]t\b|wrong|incorrect|false|ruled\s+out|eliminated|excluded|impossible|out\b)"
)
_CLAUSE_END = re.compile(r"[.;!?\n,]|\b(?:but|and|while|whereas)\b")


class Rejections:
    """Where a text's clauses end and its rejecting words stand, each found in one pass, so that asking
    about every letter of a long reply stays linear in its length."""

    def __init__(self, text: str):
        self.text = text
        self._clause_ends = [m.end() for m in _CLAUSE_END.finditer(text)]
        words = [m.span() for m in _NEGATION_BEFORE.finditer(text)]
        self._word_starts = [a for a, _ in words]
        self._word_ends = [b for _, b in words]

    def negated(self, start: int, end: int) -> bool:
        """Whether the letter at text[start:end] is rejected in its clause."""
        i = bisect_right(self._clause_ends, start) - 1
        clause = self._clause_ends[i] if i >= 0 else 0
        # The first rejecting word at or after the clause's start; words never overlap, so it ends first.
        j = bisect_left(self._word_starts, clause)
        if j < len(self._word_starts) and self._word_ends[j] <= start:
            return True
        return bool(NEGATION_AFTER.match(self.text, end))
