"""Judge prompt templates: plain text files with the grading mode's placeholders ({question}, ...).

Literal braces in a template are written doubled ({{ and }}), as in str.format.
"""

from __future__ import annotations

import string
from pathlib import Path

from genjudge.data.conversation import TURN_PLACEHOLDER, allowed_placeholder
from genjudge.data.dataset import is_missing
from genjudge.errors import InputError

# Placeholders every mode offers: an item's checklist (dataset.fields.checklist), numbered a line each.
EVERY_MODE = frozenset({"checklist"})


def template_names(text: str, path) -> set[str]:
    """The placeholders a template uses."""
    try:
        return {f for _, f, _, _ in string.Formatter().parse(text) if f}
    except ValueError as exc:
        raise InputError(f"{path}: bad template ({exc}); write literal braces as {{{{ and }}}}") from None


def _needs(missing: list[tuple[str, ...]]) -> str:
    """`{candidate}, {answer} or {answer_1}` per group, groups joined by `and`."""
    alternatives = [[f"{{{n}}}" for n in group] for group in missing]
    return " and ".join(", ".join(a[:-1]) + " or " + a[-1] if len(a) > 1 else a[0] for a in alternatives)


def load_template(path, mode, where: str = "judge.template") -> str:
    """Read a template and check its placeholders against the grading mode's (`mode.placeholders`):
    none unknown, and what the mode grades shown (`mode.graded`). `where`: the config key naming it."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{where}: template file {str(path)!r} not found")
    text = path.read_text(encoding="utf-8")
    names = template_names(text, path)
    unknown = {n for n in names - mode.placeholders - EVERY_MODE if not allowed_placeholder(n, mode.placeholders)}
    if unknown:
        raise InputError(
            f"{where}: {path}: unknown placeholder(s) {sorted(unknown)}; mode {mode.name!r} offers "
            f"{sorted(mode.placeholders | EVERY_MODE)} and, per turn j of a conversation, {turn_names(mode)}"
        )
    missing = mode.missing_graded(names)
    if missing:
        raise InputError(
            f"{where}: {path} never shows the answer it grades: mode {mode.name!r} needs {_needs(missing)}"
        )
    return text


def check_turns(text: str, path, mode, turns, where: str = "judge.template") -> None:
    """Refuse, while planning, a template for the conversation turns `turns` that uses a later
    turn's placeholders ({question_2} in turn 1's) or does not show each turn's answer."""
    names = template_names(text, path)
    for turn in sorted(turns):
        later = sorted(n for n in names if (m := TURN_PLACEHOLDER.match(n)) and int(m.group(2)) > turn)
        if later:
            raise InputError(
                f"{where}: {path} uses {{{later[0]}}}, which turn {turn} does not have: the template for turn k "
                "sees turns 1..k; choose templates per turn with judge.templates"
            )
        missing = mode.missing_graded(names, turn)
        if missing:
            raise InputError(
                f"{where}: {path} never shows the answer it grades: mode {mode.name!r} needs {_needs(missing)} "
                f"(it is the template for turn {turn})"
            )


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
