"""What an export of a run's results reads of its configuration, as typed values: the run's generators,
datasets, judges, panels and cells, and the paths of this machine an exported file must not hold.

Built once where the raw config is at hand (the export rule's script, `genjudge export`); the export
code below reads these and never the config itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.config.experiment import resolve
from genjudge.errors import InputError

FORMATS = ("eee",)  # report.export: Every Eval Ever


@dataclass(frozen=True)
class ModelEntry:
    """A generator or judge of the run, as its records describe it. `model` is as configured (a local
    directory, a hub id, an endpoint's model name): it names files here and is never written out."""

    name: str
    model: str
    revision: str | None
    engine: str
    local: bool  # weights in a directory of this machine, not a hub id nor an endpoint
    base_url: str | None = None  # an endpoint's public base URL (no credentials, no query)
    # What records call the model: a hub id, an endpoint's model name; the run's name for a directory here.
    public_model: str = ""
    max_new_tokens: int | None = None
    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n_samples: int = 1


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    hub: bool  # a Hugging Face hub id rather than a file or directory here
    hub_id: str | None = None
    hf_config: str | None = None
    hf_split: str | None = None
    hf_revision: str | None = None


@dataclass(frozen=True)
class JudgeEntry:
    name: str
    mode: str
    model: ModelEntry
    templates: tuple[str, ...]  # paths: the default first, then the per-category/turn rules' (`templates`)
    template_rules: tuple = ()  # the `templates` entries as configured
    score_range: tuple | None = None
    verdict: str = "generate"
    cascade: bool = False

    @property
    def options(self) -> dict:
        """The parse options the report's measures read (the score range)."""
        return {"score_range": list(self.score_range) if self.score_range else None}


@dataclass(frozen=True)
class PanelEntry:
    name: str
    judges: tuple[str, ...]
    rule: str
    mode: str
    score_range: tuple | None = None

    def as_dict(self) -> dict:
        """As judging.panels takes a panel."""
        out = {"judges": list(self.judges), "rule": self.rule, "mode": self.mode}
        return {**out, "score_range": list(self.score_range)} if self.score_range else out


@dataclass(frozen=True)
class ExportSettings:
    run: str
    formats: tuple[str, ...]
    unfinished_reasoning: str  # report.unfinished_reasoning, as the report counts the headline
    generators: dict  # name -> ModelEntry
    datasets: dict  # name -> DatasetEntry
    judges: dict  # name -> JudgeEntry
    cells: dict  # judge -> [Cell], every cell configured (failed ones included)
    panels: dict = field(default_factory=dict)  # name -> PanelEntry
    # Paths of this machine (and the strings that name them) that no exported text may hold.
    private: tuple[str, ...] = ()

    @property
    def results(self) -> str:
        return f"results/{self.run}"


def _model(name: str, section: dict, generator: bool) -> ModelEntry:
    from genjudge.models.endpoints import public_url
    from genjudge.models.modelref import is_local, looks_like_path

    endpoint = section["engine"] == "openai"
    url = section["endpoint"]["base_url"] if endpoint else None
    extra = {}
    if generator:
        extra = {
            "do_sample": bool(section["do_sample"]),
            "temperature": section["temperature"],
            "top_p": section["top_p"],
            "seed": section["seed"],
            "n_samples": int(section["n_samples"]),
        }
    model = str(section["model"])
    return ModelEntry(
        name=name,
        model=model,
        revision=section["revision"],
        engine=section["engine"],
        local=not endpoint and (is_local(model) or looks_like_path(model)),
        base_url=public_url(url) if url else None,
        public_model=name if looks_like_path(model) or (not endpoint and is_local(model)) else model,
        max_new_tokens=section["max_new_tokens"],
        **extra,
    )


def _dataset(name: str, section: dict) -> DatasetEntry:
    path = str(section["path"])
    hub = section["format"] in ("hf", "auto") and not os.path.exists(path)
    hf = section["hf"]
    return DatasetEntry(
        name=name,
        hub=hub,
        hub_id=path if hub else None,
        hf_config=hf["config"],
        hf_split=hf["split"],
        hf_revision=hf["revision"],
    )


def _private(config: dict, exp, workflow_dir) -> tuple[str, ...]:
    """The strings naming this machine's files: the workflow and home directories, local models, dataset,
    template and labels files, the cache and lock directories; longest first (a path before its parent)."""
    from genjudge.config.checks import judge_template
    from genjudge.judging.template_rules import template_paths
    from genjudge.models.modelref import looks_like_path

    found = {os.path.abspath(workflow_dir), os.path.expanduser("~"), config["cache_dir"], config["lock_dir"]}
    for section in [*exp.generators.values(), *exp.judges.values()]:
        if looks_like_path(str(section["model"])):
            found.add(str(section["model"]))
    for section in exp.judges.values():
        found.update(template_paths(str(judge_template({**config, "judge": section})), section["templates"]))
        found.add((section["labels"] or {}).get("path"))
    found.update(str(d["path"]) for d in exp.datasets.values() if os.path.exists(str(d["path"])))
    found = {f for f in found if f and f not in (".", "/")}
    found |= {os.path.abspath(f) for f in found}
    return tuple(sorted(found, key=lambda f: (-len(f), f)))


def export_settings(config: dict, workflow_dir=".") -> ExportSettings:
    """The typed settings of an export of the run `config` describes (validated, with the schema's
    defaults: as the workflow or a run's provenance.json holds it)."""
    from genjudge.config.checks import judge_template
    from genjudge.judging.panels import resolve_panels
    from genjudge.judging.template_rules import template_paths

    formats = tuple(config["report"]["export"])
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise InputError(f"report.export: unknown format(s) {unknown}; known: {list(FORMATS)}")
    exp = resolve(config)
    judges = {}
    for name, j in exp.judges.items():
        default = str(Path(judge_template({**config, "judge": j})))
        judges[name] = JudgeEntry(
            name=name,
            mode=j["mode"],
            model=_model(name, j, generator=False),
            templates=tuple(template_paths(default, j["templates"])),
            template_rules=tuple(j["templates"] or ()),
            score_range=tuple(j["score_range"]) if j["score_range"] else None,
            verdict=j["verdict"],
            cascade=bool(j["cascade"]),
        )
    panels = {
        n: PanelEntry(
            n, tuple(p["judges"]), p["rule"], p["mode"], tuple(p["score_range"]) if "score_range" in p else None
        )
        for n, p in resolve_panels(config.get("panels") or {}, exp).items()
    }
    return ExportSettings(
        run=config["run"],
        formats=formats,
        unfinished_reasoning=config["report"]["unfinished_reasoning"],
        generators={n: _model(n, g, generator=True) for n, g in exp.generators.items()},
        datasets={n: _dataset(n, d) for n, d in exp.datasets.items()},
        judges=judges,
        cells={j: list(exp.cells(j)) for j in exp.judges},
        panels=panels,
        private=_private(config, exp, workflow_dir),
    )


def recorded_settings(config: dict, workflow_dir=".") -> ExportSettings:
    """The export settings of a finished run from the config its provenance.json recorded (validated then):
    validated again, so that settings added to the schema since get their defaults."""
    from genjudge.config.validation import validate

    config = {k: v for k, v in config.items() if not (k in ("generators", "datasets", "judges") and v == {})}
    return export_settings(validate(config, workflow_dir), workflow_dir)


__all__ = [
    "FORMATS",
    "DatasetEntry",
    "ExportSettings",
    "JudgeEntry",
    "ModelEntry",
    "PanelEntry",
    "export_settings",
    "recorded_settings",
]
