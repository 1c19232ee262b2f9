"""The page's sections about the jobs: the GPU timeline (one band per snakemake command), throughput,
the time model against the measured seconds, provenance, and summary.json's fields no section reads.
A mixin of `Page` (page.py)."""

from __future__ import annotations

import json

from genjudge.judging.modes.base import pct
from genjudge.planning import calibration
from genjudge.report_html import timeline_plot
from genjudge.report_html.view import (
    SHOWN,
    Band,
    Endpoints,
    Extra,
    GpuTimeline,
    GpuUse,
    More,
    Provenance,
    Table,
    Throughput,
    TimeModel,
    Wait,
    join,
    measure_text,
    seconds,
)


class RunSections:
    def gpus(self) -> GpuTimeline | None:
        bands = [t for t in self.bands if t.bars]
        if not bands:
            return None
        views = [
            band(t, timeline_plot.band_title(t, i, len(bands)) if len(bands) > 1 else "") for i, t in enumerate(bands)
        ]
        jobs = self.jobs
        load = sum(j.load_seconds for j in jobs)
        compute = sum(j.compute_seconds for j in jobs)
        return GpuTimeline(
            bands=views,
            load_share=load / (load + compute) if load + compute > 0 else None,
            plot=self.plot("gpu_timeline", timeline_plot.gantt(bands)),
        )

    def throughput(self) -> Throughput | None:
        jobs = self.jobs
        if not jobs:
            return None
        rows = [
            [
                j.name,
                j.host,
                ",".join(j.gpus) or "CPU",
                j.n_items,
                seconds(j.setup_seconds),
                seconds(j.load_seconds),
                seconds(j.compute_seconds),
                seconds(j.wall),
                "" if j.tokens_per_second is None else f"{j.tokens_per_second:.1f}",
                j.resumed,
                j.shared,
                j.computed,
                seconds(j.waited_for_gpus_seconds),
            ]
            for j in jobs
        ]
        head = [
            "job",
            "host",
            "GPUs",
            "answers",
            "set-up s",
            "load s",
            "compute s",
            "wall s",
            "tokens/s",
            "from an earlier run",
            "shared in this run",
            "computed",
        ]
        return Throughput(Table([*head, "waited for GPUs s"], rows))

    def endpoints(self) -> Endpoints | None:
        from genjudge.report_html.endpoints import table_rows, totals_line

        rows = self.s.get("endpoints") or []
        if not rows:
            return None
        head, body = table_rows(rows)
        body = [[c.replace("**", "") for c in row] for row in body]
        models: dict = {}
        for r in rows:
            for served, n in r["served_models"].items():
                models.setdefault(r["model"], {}).setdefault(served, 0)
                models[r["model"]][served] += n
        lines = [
            f"{model}: served as {', '.join(f'{k} x{v}' for k, v in served.items())}; system_fingerprint "
            + (
                ", ".join(sorted({fp for r in rows if r["model"] == model for fp in r["system_fingerprints"]}))
                or "none"
            )
            for model, served in models.items()
        ]
        return Endpoints(Table(head, body), [*lines, totals_line(rows)])

    def provenance_section(self) -> Provenance:
        p = self.provenance or {}
        git = p.get("git") or {}
        run = Table(
            ["what", "value"],
            [
                ["config sha256", p.get("config_sha256")],
                ["git commit", f"{git.get('commit')}{' (uncommitted changes)' if git.get('dirty') else ''}"],
            ],
            "narrow",
        )
        models = []
        for role, entries in (p.get("models") or {}).items():
            for name, m in entries.items():
                models.append([role.rstrip("s"), name, m.get("model"), m.get("revision"), join(m.get("fingerprint"))])
        files = [
            [kind.rstrip("s"), name, f["path"], f["sha256"] or "not a local file", f["bytes"]]
            for kind, entries in (p.get("inputs") or {}).items()
            for name, f in entries.items()
        ]
        config_yaml = None
        if p.get("config"):
            import yaml

            config_yaml = yaml.safe_dump(p["config"], sort_keys=False)
        return Provenance(
            run=run,
            models=Table(["role", "name", "model", "revision", "fingerprint"], models, "narrow"),
            files=Table(["input", "name", "path", "sha256", "bytes"], files, "narrow") if files else None,
            packages=Table(
                ["package", "version"],
                [[k, v or "not installed"] for k, v in (p.get("packages") or {}).items()],
                "narrow",
            ),
            config_yaml=config_yaml,
        )

    def time_model(self) -> TimeModel | None:
        check = self.s.get("time_model") or {}
        if not check.get("jobs"):
            return None
        return TimeModel(
            Table(*calibration.check_rows(check)),
            calibration.ratio_text(check),
            calibration.CHECK_NOTE,
            calibration.fixed_costs_text(check),
        )

    def more(self) -> More | None:
        extra = [_extra(k, v) for k, v in self.s.items() if k not in SHOWN]
        return More(extra) if extra else None


def band(t, label: str) -> Band:
    """One command's part of the timeline section: its lanes, stage walls and critical path."""
    gpu_stats = [s for s in t.lane_stats if s.kind == "gpu"]
    lanes = [
        [
            s.lane,
            s.jobs,
            seconds(s.busy_seconds),
            seconds(s.load_seconds),
            seconds(s.compute_seconds),
            seconds(s.idle_seconds) if s.kind == "gpu" else "",
            pct(s.busy_fraction),
        ]
        for s in t.lane_stats
    ]
    stages = [
        [s["stage"], s["jobs"], seconds(s["start"]), seconds(s["end"]), seconds(s["wall"]), seconds(s["load"])]
        for s in t.stages
    ]
    path = [
        [p["job"], p["after"], seconds(p["wait_before"]) if p["wait_before"] is not None else ""]
        + [seconds(p["start"]), seconds(p["end"]), seconds(p["load"]), seconds(p["compute"])]
        for p in t.critical_path
    ]
    gpu_use = None
    if gpu_stats:
        gpu_use = GpuUse(
            n_gpus=len(gpu_stats),
            span=t.span,
            idle_seconds=sum(s.idle_seconds for s in gpu_stats),
            mean_busy_fraction=sum(s.busy_fraction or 0 for s in gpu_stats) / len(gpu_stats),
            never_used=[s.lane for s in gpu_stats if s.jobs == 0],
        )
    waits = [p for p in t.critical_path if p["wait_before"] is not None]
    longest = None
    if waits:
        w = max(waits, key=lambda p: p["wait_before"])
        longest = Wait(w["job"], w["after"], w["wait_before"])
    return Band(
        label=label,
        jobs=len(t.jobs),
        failed=[f"{j.name.removesuffix(' (failed)')}: {j.failed}" for j in t.failed],
        gpu_use=gpu_use,
        longest_wait=longest,
        lanes=Table(["lane", "jobs", "busy s", "load s", "compute s", "idle s", "busy fraction"], lanes, "narrow"),
        stages=Table(["stage", "jobs", "first start s", "last finish s", "wall s", "load s (sum)"], stages, "narrow"),
        critical_path=Table(
            ["job", "waited for", "waited s", "start s", "end s", "load s", "compute s"], path, "narrow"
        ),
    )


def _extra(key: str, v) -> Extra:
    title = key.replace("_", " ")
    if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
        head = list(dict.fromkeys(k for r in v for k in r))
        if all(not isinstance(x, dict | list) or _is_measure(x) for r in v for x in r.values()):
            return Extra(title, Table(head, [[_flat(r.get(k)) for k in head] for r in v]), None)
    if isinstance(v, dict) and v and all(not isinstance(x, dict | list) or _is_measure(x) for x in v.values()):
        return Extra(title, Table(["key", "value"], [[k, _flat(x)] for k, x in v.items()], "narrow"), None)
    text = json.dumps(v, indent=1, default=str)
    if len(text) > 20000:
        text = text[:20000] + "\n…"
    return Extra(title, None, text)


def _is_measure(x) -> bool:
    return isinstance(x, dict) and "value" in x


def _flat(x) -> str:
    if _is_measure(x):
        return measure_text(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)
