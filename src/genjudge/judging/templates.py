"""Judge prompt templates: plain text files with the grading mode's placeholders ({question}, ...).

Literal braces in a template are written doubled ({{ and }}), as in str.format.
"""

from __future__ import annotations

import string
from pathlib import Path

from genjudge.conversation import allowed_placeholder
from genjudge.dataset import is_missing
from genjudge.errors import InputError


def load_template(path, mode) -> str:
    """Read a template and check its placeholders against the grading mode's (`mode.placeholders`)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"judge.template: template file {str(path)!r} not found")
    text = path.read_text(encoding="utf-8")
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(text) if f}
    except ValueError as exc:
        raise InputError(f"{path}: bad template ({exc}); write literal braces as {{{{ and }}}}") from None
    unknown = {n for n in names - mode.placeholders if not allowed_placeholder(n, mode.placeholders)}
    if unknown:
        raise InputError(
            f"{path}: unknown placeholder(s) {sorted(unknown)}; mode {mode.name!r} offers {sorted(mode.placeholders)}"
            f" and, per turn j of a conversation, {turn_names(mode)}"
        )
    return text


def render(template: str, **values) -> str:
    return template.format(**{k: ("(none)" if is_missing(v) else v) for k, v in values.items()})


def turn_names(mode) -> str:
    answers = "answer_a_j, answer_b_j" if "answer_a" in mode.placeholders else "answer_j"
    return f"question_j, {answers}, ref_answer_j (and turn)"


def render_request(template: str, where: str, **values) -> str:
    """`render` for one judge request; a placeholder with no value here (`{answer_2}` in a
    template applied to turn 1, or to a one-turn item) is an error naming the request."""
    try:
        return render(template, **values)
    except KeyError as exc:
        turn = values.get("turn", 1)
        raise InputError(
            f"{where}: the judge template uses {{{exc.args[0]}}}, which has no value here: the template "
            f"for turn {turn} sees turns 1..{turn} of the conversation; choose templates per turn "
            "with judge.templates"
        ) from None
