"""Judge prompt templates: plain text files with {question}, {reference}, {candidate}.

Literal braces in a template are written doubled ({{ and }}), as in str.format.
"""

from __future__ import annotations

import string
from pathlib import Path

from genjudge.dataset import is_missing
from genjudge.errors import InputError

FIELDS = {"reference": {"question", "reference", "candidate"},
          "score": {"question", "reference", "candidate"},
          "pairwise": {"question", "reference", "answer_a", "answer_b"}}


def load_template(path, mode: str) -> str:
    path = Path(path)
    if not path.exists():
        raise InputError(f"judge.template: template file {str(path)!r} not found")
    text = path.read_text(encoding="utf-8")
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(text) if f}
    except ValueError as exc:
        raise InputError(f"{path}: bad template ({exc}); write literal braces as {{{{ and }}}}") from None
    unknown = names - FIELDS[mode]
    if unknown:
        raise InputError(f"{path}: unknown placeholder(s) {sorted(unknown)}; mode {mode!r} offers {sorted(FIELDS[mode])}")
    return text


def render(template: str, **values) -> str:
    return template.format(**{k: ("(none)" if is_missing(v) else v) for k, v in values.items()})
