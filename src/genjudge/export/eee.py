"""A run in Every Eval Ever's format: one aggregate record and one instance file per cell (a generator's
answers on a dataset graded by a judge or a panel, against an opponent for pairwise judges), and a
manifest listing them, under `results/<run>/export/eee/`."""

from __future__ import annotations

from pathlib import Path

from genjudge.config.export import ExportSettings
from genjudge.export import eee_files as files
from genjudge.export.eee_cells import context, judge_cells, panel_cells
from genjudge.export.eee_instances import instance_records
from genjudge.export.eee_records import aggregate, evaluation_name, model_id
from genjudge.export.inputs import CellInput, RunContext, RunData

MANIFEST = "manifest.json"


def evaluation_id(settings: ExportSettings, ci: CellInput) -> str:
    kind = "panel" if ci.panel_rule else "judge"  # a panel may share a judge's name
    parts = ["genjudge", settings.run, ci.cell.dataset, kind, ci.name, ci.cell.generator]
    return "/".join(parts + (["vs", ci.cell.opponent] if ci.cell.opponent else []))


def write_cell(ci: CellInput, ctx: RunContext, root: Path, done: files.Written) -> dict:
    """Writes the cell's two files (where their bytes change); its manifest entry."""
    eid = evaluation_id(ctx.settings, ci)
    mid = model_id(ctx.settings.generators[ci.cell.generator])
    where = f"{files.store_dir(ci.cell.dataset, mid)}/{files.file_uuid(eid)}"
    ids = {"evaluation_id": eid, "model_id": mid, "evaluation_name": evaluation_name(ci)}
    record = aggregate(ci, ctx, eid, {})
    if record["evaluation_results"]:  # the headline, which each answer's score is its part of
        ids["evaluation_result_id"] = record["evaluation_results"][0]["evaluation_result_id"]
    instances = instance_records(ci, ctx, ids)
    data = files.instances_bytes(instances)
    record["detailed_evaluation_results"].update(
        file_path=f"{where}_samples.jsonl", checksum=files.sha256_of(data), total_rows=len(instances)
    )
    files.write_if_changed(root / f"{where}_samples.jsonl", data, done, root)
    files.write_aggregate(root / f"{where}.json", record, done, root)
    return {
        "aggregate": f"{where}.json",
        "instances": f"{where}_samples.jsonl",
        "evaluation_id": eid,
        "generator": ci.cell.generator,
        "dataset": ci.cell.dataset,
        "judge": ci.name,
        "panel": ci.panel_rule is not None,
        "opponent": ci.cell.opponent,
        "status": "failed" if ci.failed else "judged",
        "rows": len(instances),
        "results": len(record["evaluation_results"]),
    }


def export_eee(settings: ExportSettings, data: RunData, root) -> files.Written:
    """Every cell's files under `root` (results/<run>/export/eee), then the manifest; files of cells the
    run no longer has are removed."""
    root = Path(root)
    ctx = context(settings, data)
    judged = judge_cells(settings, data)
    done = files.Written()
    entries = [write_cell(ci, ctx, root, done) for ci in [*judged, *panel_cells(settings, data, judged)]]
    files.remove_stale(root, {p for e in entries for p in (e["aggregate"], e["instances"])}, done)
    manifest = {
        "format": "Every Eval Ever",
        "schema_version": files.SCHEMA_VERSION,
        "run": settings.run,
        "eval_library": {"name": "genjudge", "version": ctx.packages.get("genjudge") or "unknown"},
        "cells": entries,
    }
    files.write_if_changed(root / MANIFEST, files.aggregate_bytes(manifest), done, root)
    return done
