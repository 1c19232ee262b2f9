"""Rule export and `genjudge export`: a finished run's results in the formats `report.export` names
(Every Eval Ever: genjudge.export.eee), read from the run's files alone; no model is loaded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from genjudge.config.export import ExportSettings
from genjudge.errors import InputError
from genjudge.export.eee import export_eee
from genjudge.export.eee_files import Written
from genjudge.export.inputs import RunData
from genjudge.judging.template_rules import texts_digest
from genjudge.store import failures
from genjudge.store.records import GenerateMeta, JudgeMeta, RecordError

# What an export reads of the judgments and the judge's stored calls: not the prompts sent to the judge
# (most of their bytes), nor the cache keys.
UNREAD = {"judge_prompt", "key", "judge_key", "messages"}
RAW_COLUMNS = [
    "generator",
    "dataset",
    "opponent",
    "id",
    "turn",
    "sample",
    "order",
    "judge_output",
    "judge_n_prompt_tokens",
    "judge_n_generated_tokens",
]


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: not found; has the run finished (its report written)?") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None


def _parquet(path: Path, skip=UNREAD, columns=None) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except FileNotFoundError:
        raise InputError(f"{path}: not found; has the run finished?") from None
    wanted = [c for c in (columns or names) if c in names and c not in skip]
    return pd.read_parquet(path, columns=wanted)


def templates(settings: ExportSettings, judge_metas: dict, workflow_dir) -> dict:
    """Each judge's template texts ([(rule or None, text)], the default first), checked against the hash its
    judge recorded: the text exported is the one the judge was given."""
    out = {}
    for name, j in settings.judges.items():
        texts = []
        for path in j.templates:
            file = Path(workflow_dir) / path
            try:
                texts.append(file.read_text(encoding="utf-8"))
            except OSError:
                raise InputError(
                    f"{path}: judge {name!r}'s template not found under {workflow_dir}; export from the "
                    "workflow's directory (genjudge export --directory)"
                ) from None
        recorded = judge_metas[name].template_hash if name in judge_metas else None
        if recorded and texts_digest(texts) != recorded:
            raise InputError(
                f"{j.templates[0]}: judge {name!r}'s templates changed since it judged (template_hash {recorded} in "
                f"{settings.results}/judge/{name}/raw.meta.json, {texts_digest(texts)} now); run the workflow "
                "again, which judges with them, or put them back"
            )
        rules = [{k: v for k, v in r.items() if k != "template" and v is not None} for r in j.template_rules]
        out[name] = list(zip([None, *rules], texts))
    return out


def read_run(settings: ExportSettings, workflow_dir=".") -> RunData:
    """Everything an export reads of `results/<run>/`; InputError naming the file that is missing or bad."""
    res = Path(workflow_dir) / settings.results
    summary = _json(res / "report" / "summary.json")
    gen_metas, judge_metas = [], {}
    try:
        for g, d in {(c.generator, c.dataset) for cells in settings.cells.values() for c in cells}:
            gen_metas += [GenerateMeta.read(p) for p in sorted((res / "generations" / g / d).glob("*.meta.json"))]
        for j in settings.judges:
            if (res / "judge" / j / "raw.meta.json").exists():
                judge_metas[j] = JudgeMeta.read(res / "judge" / j / "raw.meta.json")
    except RecordError as exc:
        raise InputError(str(exc)) from None
    judgments, raw = {}, {}
    for j in settings.judges:
        if (res / "judgments" / f"{j}.parquet").exists():
            judgments[j] = _parquet(res / "judgments" / f"{j}.parquet")
        if (res / "judge" / j / "raw.parquet").exists():
            raw[j] = _parquet(res / "judge" / j / "raw.parquet", skip=set(), columns=RAW_COLUMNS)
    items, digests, answers = {}, {}, {}
    for d in settings.datasets:
        path = res / "items" / f"{d}.parquet"
        if path.exists():
            items[d] = pd.read_parquet(path)
            digests[d] = hashlib.sha256(path.read_bytes()).hexdigest()
    for f in summary.get("failed_cells") or []:  # a failed judge's cells: their answers, where they exist
        path = res / "generations" / f["generator"] / f"{f['dataset']}.parquet"
        if path.exists() and failures.generation_errors(path) is None:
            answers[(f["generator"], f["dataset"])] = _parquet(path)
    return RunData(
        summary=summary,
        provenance=_json(res / "report" / "provenance.json"),
        judgments=judgments,
        raw=raw,
        gen_metas=gen_metas,
        judge_metas=judge_metas,
        items=items,
        generations=answers,
        item_digests=digests,
        templates=templates(settings, judge_metas, workflow_dir),
    )


def run_export(settings: ExportSettings, fmt: str, workflow_dir=".") -> Written:
    """Write the run's export in `fmt` under results/<run>/export/<fmt>/; what was written, left, removed."""
    if fmt != "eee":
        raise InputError(f"--format: {fmt!r} is not a format genjudge exports (eee: Every Eval Ever)")
    data = read_run(settings, workflow_dir)
    return export_eee(settings, data, Path(workflow_dir) / settings.results / "export" / fmt)
