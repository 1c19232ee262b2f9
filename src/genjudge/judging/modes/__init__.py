"""Grading modes, one object each, looked up by name.

Adding a mode: a module with a `JudgeMode` subclass (name, placeholders, pattern,
labels, marker, `metrics` and `headline`; `requests`, `parse`, `leaderboard`,
`leaderboard_measure` and `category_column` have defaults, and so do the hooks exports read: what one
answer's verdict counts for, `answer_value`, `answer_correct`, `judge_calls`, `headline_range`,
`headline_rule`), its template, and `register(...)`.
Modes outside the package are loaded from the config's `plugins`.
"""

from genjudge.judging.modes import pairwise, reference, rubric, score  # noqa: F401  (built-in modes register)
from genjudge.judging.modes.base import JudgeCall, JudgeMode, JudgeRequest, get, logprob_modes, names, register

__all__ = ["JudgeCall", "JudgeMode", "JudgeRequest", "get", "logprob_modes", "names", "register"]
