"""The view model of a finished run's report.html (genjudge.report_html.page), made again from the files
the report job read: the config it recorded in provenance.json, the metas, the judgments, the failed
attempts. Tests read the page's counts from it rather than from the HTML."""

from __future__ import annotations

import json
from pathlib import Path

from genjudge.config.experiment import resolve
from genjudge.report_html import Cell, Page, PageView
from genjudge.stages.report import read_judgments, summarise_experiment
from genjudge.stages.report_table import Study
from genjudge.store import failures
from genjudge.store.records import GenerateMeta, JudgeMeta


def report_view(results: Path) -> PageView:
    prov = json.loads((results / "report" / "provenance.json").read_text())
    config = prov["config"]
    exp = resolve(config)
    gen_metas = [GenerateMeta.read(p) for p in sorted((results / "generations").glob("*/*/*.meta.json"))]
    judge_metas = {j: JudgeMeta.read(results / "judge" / j / "raw.meta.json") for j in exp.judges}
    study = Study.of(exp, config.get("panels") or {}, gen_metas, judge_metas)
    judgments = {j: read_judgments(results / "judgments" / f"{j}.parquet") for j in study.exp.judges}
    run, cells = summarise_experiment(study.exp, config, judgments, study.gen_metas, study.judge_metas)
    study.add_to(run)
    page = Page(
        run.to_dict(),
        [Cell(k, s, df) for k, (s, df) in cells.items()],
        study.gen_metas,
        study.judge_metas,
        prov,
        attempts=failures.attempts_of(results),
    )
    return page.view()
