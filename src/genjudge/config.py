"""The workflow's configuration: one loader and one set of checks for the Snakefile and the CLI.

Layers, later winning: the schema's defaults (`config/schemas/config.schema.yaml`,
the only home of defaults); the demo (`config/demo.yaml`) only when no
`--configfile` is given; each `--configfile`; `--config key=value` overrides.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import yaml

from genjudge.errors import InputError

SCHEMA = "config/schemas/config.schema.yaml"
DEMO = "config/demo.yaml"
# The workflow directory this package sits in (src/genjudge/ inside it).
WORKFLOW_DIR = Path(__file__).resolve().parents[2]


def _root(root) -> Path:
    return Path(root) if root is not None else WORKFLOW_DIR


def schema(root=None) -> dict:
    return yaml.safe_load((_root(root) / SCHEMA).read_text())


def _types(sub: dict) -> set[str]:
    t = sub.get("type")
    found = set(t if isinstance(t, list) else [t] if t else [])
    for alt in sub.get("oneOf", []) + sub.get("anyOf", []):
        found |= _types(alt)
    return found


def coerce(config: dict, sch: dict) -> dict:
    """Strings where the schema wants a boolean, number or null are parsed as YAML scalars.

    `--config 'judge={"cascade": false}'` reaches the config as the string 'false'
    (Snakemake parses nested values as strings); this makes it the boolean.
    """
    props = sch.get("properties", {})
    for key, value in list(config.items()):
        sub = props.get(key)
        if sub is None:
            continue
        if isinstance(value, dict) and "properties" in sub:
            coerce(value, sub)
        elif isinstance(value, str):
            wanted = _types(sub)
            if "string" in wanted and value not in ("null", "~") or not wanted & {"boolean", "integer", "number",
                                                                                  "null"}:
                continue
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                continue
            kinds = {bool: "boolean", int: "integer", float: "number", type(None): "null"}
            kind = kinds.get(type(parsed))
            if kind and (kind in wanted or (kind == "integer" and "number" in wanted)):
                config[key] = parsed
    return config


def validate(config: dict, root=None) -> dict:
    """Coerce command-line strings, validate against the schema and fill in its defaults (in place)."""
    from snakemake.utils import validate as sm_validate

    coerce(config, schema(root))
    for key in ("generators", "datasets", "judges"):
        # Before validation, a key present is one the user wrote (the schema's {} comes after).
        if key in config and config[key] == {}:
            raise InputError(f"{key}: an empty map names nothing to run; leave it out for one entry")
    sm_validate(config, str(_root(root) / SCHEMA), set_default=True)
    return config


def defaults(**sections) -> dict:
    """The schema's defaults with `sections` over them, validated (no demo values)."""
    return validate({k: dict(v) if isinstance(v, dict) else v for k, v in sections.items()})


def layers(configfiles=(), root=None) -> list[Path]:
    """The config files a run reads, in order: the demo only when no file is given."""
    files = [Path(p) for p in configfiles]
    return files or [_root(root) / DEMO]


def load(configfiles=(), overrides=(), root=None) -> dict:
    """The config a `snakemake --configfile ... --config ...` run would see, validated."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    config: dict = {}
    for path in layers(configfiles, root):
        if not path.exists():
            raise InputError(f"{path}: config file not found")
        update_config(config, yaml.safe_load(path.read_text()) or {})
    try:
        update_config(config, parse_config(list(overrides)))
    except ValueError as exc:
        raise InputError(f"--config: {exc}") from None
    return validate(config, root)


def load_plugins(config: dict) -> None:
    """Import the modules listed under `plugins` (Python files or module names); they register modes."""
    for entry in config.get("plugins") or []:
        if entry.endswith(".py"):
            path = Path(entry)
            if not path.exists():
                raise InputError(f"plugins: {entry!r} not found")
            name = f"genjudge_plugin_{path.stem}"
            if name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            try:
                importlib.import_module(entry)
            except ImportError as exc:
                raise InputError(f"plugins: cannot import {entry!r} ({exc})") from None


def judge_template(config: dict) -> str:
    """The configured template, or the mode's own."""
    from genjudge.judging import modes

    load_plugins(config)
    judge = config["judge"]
    return judge["template"] or modes.get(judge["mode"]).default_template()


def is_demo_model(name: str) -> bool:
    """models/demo-* are built by rule demo_model when missing."""
    parts = os.path.normpath(name).split(os.sep)
    return len(parts) == 2 and parts[0] == "models" and parts[1].startswith("demo-")


DEMO_DIR = "config/demo"


def check_not_demo_template(template: str, model: str) -> None:
    """The demo's compact template was trained into the tiny demo judge; a real judge prompted
    with it never writes the verdict line the parser looks for."""
    parts = Path(os.path.normpath(template)).parts
    if tuple(parts[:2]) == tuple(Path(DEMO_DIR).parts) and not is_demo_model(model):
        raise InputError(f"judge.template: {template} is the demo judge's compact template (it never asks for "
                         f"a verdict line); judge.model {model!r} is not a demo model: set judge.template to null "
                         "for the mode's own template (config/templates/<mode>.txt) or to a template of yours")


def check(config: dict, data: bool = True) -> None:
    """Everything that can be wrong before a job starts or a model loads; raises InputError
    naming the key, file, line and field. `data=False` skips reading the datasets."""
    from genjudge.dataset import load_items
    from genjudge.experiment import resolve
    from genjudge.judging import modes
    from genjudge.judging.templates import load_template
    from genjudge.modelref import check_model
    from genjudge.sharding import shard_bounds
    from genjudge.specs import DatasetSpec, JudgeSpec

    required = {"run": config["run"], "dataset.path": config["dataset"]["path"],
                "generator.model": config["generator"]["model"], "judge.model": config["judge"]["model"]}
    maps = {"dataset.path": "datasets", "generator.model": "generators", "judge.model": "judges"}
    unset = [k for k, v in required.items() if v is None and not config.get(maps.get(k, ""))]
    if unset:
        raise InputError(f"{', '.join(unset)}: not set; every run names them (config/README.md; "
                         f"{DEMO} is a complete example)")
    load_plugins(config)
    exp = resolve(config)
    for kind, entries in (("datasets", exp.datasets), ("generators", exp.generators), ("judges", exp.judges)):
        for name, section in entries.items():
            where = f"{kind}.{name}" if config.get(kind) else kind[:-1]
            key = "path" if kind == "datasets" else "model"
            if section[key] is None:
                raise InputError(f"{where}.{key}: not set")
    from genjudge.judging.extraction import check_method

    for name, section in exp.datasets.items():
        for side in ("reference", "candidate"):
            try:
                check_method(section["answer"][side])
            except ValueError as exc:
                where = f"datasets.{name}" if config.get("datasets") else "dataset"
                raise InputError(f"{where}.answer.{side}: {exc}") from None
    if data:
        for name, section in exp.datasets.items():
            ds = DatasetSpec.from_config(section)
            n_items = len(load_items(ds.path, ds.fields, ds.format, ds.hf))
            shard_bounds(n_items, exp.shards(name, config))
    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            role = f"{kind}s.{name}" if config.get(f"{kind}s") else kind
            check_model(section["model"], role, buildable=is_demo_model(section["model"]))
    for name, section in exp.judges.items():
        spec = JudgeSpec.from_config(section)
        mode = modes.get(spec.mode)
        template = judge_template({**config, "judge": section})
        check_not_demo_template(template, spec.model)
        load_template(template, mode)
        if spec.verdict_pattern:
            try:
                mode.compile(spec.verdict_pattern)
            except Exception as exc:
                raise InputError(f"judge.verdict_pattern: {exc}") from None
        mode.check(spec)
