"""A pairwise baseline from another model's published answers (AlpacaEval's reference outputs).

AlpacaEval ships the baseline model's answers as a JSON array of {instruction, output, ...}.
`genjudge baseline` reads such a file with the run's own `dataset` settings, so each answer gets
the id the run gives its item (ids derived from content match when the instructions do), and
writes the generations file `judge.baseline` names: id, turn, output.
"""

from __future__ import annotations

import pandas as pd

from genjudge.data.dataset import _is_null, _lookup, load_items, read_rows
from genjudge.errors import InputError
from genjudge.store import atomic


def build_baseline(section: dict, answers_path, output_field: str, out_path) -> pd.DataFrame:
    """`section` is a validated dataset section whose path is replaced by `answers_path`."""
    items = load_items(answers_path, section["fields"], section["format"], section["hf"])
    source, rows = read_rows(answers_path, section["format"], section["hf"])
    outputs = []
    for pos, obj in rows:  # load_items keeps every row, in order
        value = _lookup(obj, output_field)
        if _is_null(value) or not isinstance(value, str):
            raise InputError(f"{source}, {pos}: field {output_field!r} (the baseline's answer) is missing or not text")
        outputs.append(value)
    out = pd.DataFrame({"id": items["id"], "turn": 1, "output": outputs})
    atomic.write_parquet(out_path, out)
    return out
