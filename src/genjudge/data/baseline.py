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
    out = dataset_answers({**section, "path": answers_path}, output_field, "the baseline's answer", missing="fail")
    out = out[["id", "turn", "output"]]
    atomic.write_parquet(out_path, out)
    return out


def dataset_answers(section: dict, field: str, what: str, missing: str = "skip") -> pd.DataFrame:
    """Each item's answer from a field of its row (dotted: `ideal_completions_data.ideal_completion`), as
    the dataset section reads it: id, turn 1, output, and `skipped` saying why where the row has none
    (`missing`: skip it, or fail naming the line). A value that is there and not text is an error."""
    source, rows = read_rows(section["path"], section["format"], section["hf"])
    items = load_items(section["path"], section["fields"], section["format"], section["hf"], read=(source, rows))
    outputs, skipped = [], []
    for pos, obj in rows:  # load_items keeps every row, in order
        value = _lookup(obj, field)
        if _is_null(value) or (isinstance(value, str) and not value.strip()):
            if missing == "fail":
                raise InputError(f"{source}, {pos}: field {field!r} ({what}) is missing or not text")
            outputs.append(None)
            skipped.append(f"no answer in the dataset's field {field!r}")
            continue
        if not isinstance(value, str):
            raise InputError(f"{source}, {pos}: field {field!r} ({what}) is not text")
        outputs.append(value)
        skipped.append(None)
    return pd.DataFrame({"id": items["id"], "turn": 1, "output": outputs, "skipped": skipped})
