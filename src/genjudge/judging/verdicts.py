"""Strict verdict extraction from a judge's text.

The pattern is searched everywhere in the text and the LAST match decides, so
a judge that discusses "incorrect" options in its reasoning before its final
`VERDICT: CORRECT` is read correctly. No match gives an explicit `unparsed`
result with a reason; it is never counted as a wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_PATTERN = r"VERDICT:\s*\**\s*(CORRECT|INCORRECT|PARTIAL)\b"
DEFAULT_LABELS = {"CORRECT": "correct", "INCORRECT": "incorrect", "PARTIAL": "partial"}
SCORE_PATTERN = r"SCORE:\s*\**\s*(10|[1-9])\b"
PAIRWISE_PATTERN = r"VERDICT:\s*\**\s*\[{0,2}(A|B|TIE)\]{0,2}(?![A-Za-z])"

# Per grading mode: (pattern, labels, marker). Score labels are empty: the captured number is the verdict.
MODES = {
    "reference": (DEFAULT_PATTERN, DEFAULT_LABELS, "VERDICT"),
    "score": (SCORE_PATTERN, {}, "SCORE"),
    "pairwise": (PAIRWISE_PATTERN, {"A": "a", "B": "b", "TIE": "tie"}, "VERDICT"),
}


@dataclass
class Verdict:
    verdict: str | None  # a label value, or None when unparsed
    reason: str | None  # why it is unparsed
    n_markers: int


def compile_pattern(pattern: str) -> re.Pattern:
    rx = re.compile(pattern)
    if rx.groups < 1:
        raise ValueError(f"verdict pattern {pattern!r} needs one capturing group for the label")
    return rx


def parse_verdict(text: str | None, pattern: str = DEFAULT_PATTERN, labels: dict | None = None,
                  marker: str | None = "VERDICT") -> Verdict:
    labels = DEFAULT_LABELS if labels is None else labels
    rx = compile_pattern(pattern) if isinstance(pattern, str) else pattern
    if text is None or not text.strip():
        return Verdict(None, "empty judge output", 0)
    matches = list(rx.finditer(text))
    if not matches:
        if marker and marker.lower() in text.lower():
            return Verdict(None, f"{marker} marker without a recognised label", 0)
        return Verdict(None, "no verdict marker", 0)
    raw = matches[-1].group(1)
    if raw in labels:
        return Verdict(labels[raw], None, len(matches))
    if raw.upper() in labels:
        return Verdict(labels[raw.upper()], None, len(matches))
    if not labels:  # scores: the captured text is the verdict
        return Verdict(raw, None, len(matches))
    return Verdict(None, f"label {raw!r} is not one of {sorted(labels)}", len(matches))
