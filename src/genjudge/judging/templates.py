"""Judge prompt templates: plain text files with the grading mode's placeholders ({question}, ...).

Literal braces in a template are written doubled ({{ and }}), as in str.format.
"""

from __future__ import annotations

import string
from pathlib import Path

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
    unknown = names - mode.placeholders
    if unknown:
        raise InputError(
            f"{path}: unknown placeholder(s) {sorted(unknown)}; mode {mode.name!r} offers {sorted(mode.placeholders)}"
        )
    return text


def render(template: str, **values) -> str:
    return template.format(**{k: ("(none)" if is_missing(v) else v) for k, v in values.items()})
