"""Strict verdict extraction from a judge's text.

The pattern is searched everywhere in the text and the LAST match decides, so
a judge that discusses "incorrect" options in its reasoning before its final
`VERDICT: CORRECT` is read correctly. No match gives an explicit `unparsed`
result with a reason; it is never counted as a wrong answer. The reason is the
cause alone (the same words for every text that fails the same way, so the
report counts causes); what differs from text to text, such as how it ends or
the label it gave, is the `detail`. Each grading mode
(`judging/modes/`) owns its pattern, labels and marker word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Verdict:
    verdict: str | None  # a label value, or None when unparsed
    reason: str | None  # why it is unparsed: the cause, the same for every text that fails alike
    n_markers: int
    detail: str | None = None  # this text's part: how it ends, the label it gave


def compile_pattern(pattern: str) -> re.Pattern:
    rx = re.compile(pattern)
    if rx.groups < 1:
        raise ValueError(f"verdict pattern {pattern!r} needs one capturing group for the label")
    return rx


def parse_verdict(text: str | None, pattern, labels: dict, marker: str | None) -> Verdict:
    """`labels` maps the captured text to a verdict (empty: the captured text is the verdict);
    `marker` is the word the pattern anchors on, used only to explain a failed parse."""
    rx = compile_pattern(pattern) if isinstance(pattern, str) else pattern
    if not isinstance(text, str) or not text.strip():  # None, or the NaN of a missing cell
        return Verdict(None, "empty judge output", 0)
    matches = list(rx.finditer(text))
    if not matches:
        if marker and marker.lower() in text.lower():
            return Verdict(None, f"{marker} marker without a recognised label", 0)
        if marker:
            return Verdict(None, "no verdict marker", 0)
        tail = " ".join(text.split())[-60:]
        return Verdict(None, f"no match for the verdict pattern {rx.pattern}", 0, f"the text ends: ...{tail}")
    raw = matches[-1].group(1)
    if raw in labels:
        return Verdict(labels[raw], None, len(matches))
    if raw.upper() in labels:
        return Verdict(labels[raw.upper()], None, len(matches))
    if not labels:  # scores: the captured text is the verdict
        return Verdict(raw, None, len(matches))
    return Verdict(None, f"label not one of {sorted(labels)}", len(matches), f"label {raw!r}")
