"""The configuration as a run sees it: the layers read in order, typed, validated against the
schema and filled with its defaults; and the plugins a config names. config.py adds the checks of
a whole run on top (and re-exports these); experiment and specs build on this module alone.

Layers, later winning: the schema's defaults (`config/schemas/config.schema.yaml`,
the only home of defaults); the demo (`config/demo.yaml`) only when no
`--configfile` is given; each `--configfile`; `--config key=value` overrides.
"""

from __future__ import annotations

import copy
import datetime
import functools
import hashlib
import importlib
import importlib.util
import math
import sys
from pathlib import Path

import yaml

from genjudge.errors import InputError

SCHEMA = "config/schemas/config.schema.yaml"
DEMO = "config/demo.yaml"
# The workflow directory this package sits in (src/genjudge/ inside it).
WORKFLOW_DIR = Path(__file__).resolve().parents[3]


def _root(root) -> Path:
    return Path(root) if root is not None else WORKFLOW_DIR


def schema(root=None) -> dict:
    """The schema as a dict of its own (a copy: callers may change it)."""
    path = _root(root) / SCHEMA
    return copy.deepcopy(_read_schema(str(path), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _read_schema(path: str, mtime_ns: int) -> dict:
    # Parsed once per version of the file, with libyaml where PyYAML has it: the pure-Python parser
    # takes 0.07-0.13 CPU-s on it, libyaml 0.008, and every Snakemake run and job reads it.
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _valid(value, sub: dict) -> bool:
    import jsonschema

    return jsonschema.Draft202012Validator(sub).is_valid(value)


def _coerce_value(value, sub: dict):
    """A command-line string as the schema wants it: kept when valid as it is, else its YAML reading
    (`false`, `7`, `null`, `auto`) when that is valid; lists and maps element by element."""
    if isinstance(value, dict):
        return coerce(value, sub)
    if isinstance(value, list):
        items = sub.get("items")
        return [_coerce_value(v, items) for v in value] if isinstance(items, dict) else value
    if isinstance(value, str) and value in ("null", "~") and _valid(None, sub):
        return None  # `null` for a key that may be null: there is no string "null" to mean
    if isinstance(value, datetime.date) and _valid(value.isoformat(), sub):
        return value.isoformat()  # YAML reads an unquoted 2024-11-26 as a date
    if not isinstance(value, str) or _valid(value, sub):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    # A typed reading that is still invalid (`0` below a minimum) is what the user meant: the error names it.
    return parsed if _valid(parsed, sub) or not isinstance(parsed, str) else value


def coerce(config: dict, sch: dict) -> dict:
    """Strings from `--config` typed as the schema says (in place).

    Snakemake hands nested `--config` values over as strings (`judge={"cascade": false}` gives
    'false'); this makes them the booleans, numbers and nulls the schema asks for.
    """
    props = sch.get("properties", {})
    extra = sch.get("additionalProperties")
    for key, value in list(config.items()):
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        if sub is not None:
            config[key] = _coerce_value(value, sub)
    return config


NAMED = ("generators", "datasets", "judges", "panels")


def remove_nulls(config: dict) -> list[str]:
    """`name: null` in `generators`, `datasets`, `judges` or `panels` removes that entry (in place).

    Snakemake deep-merges maps across --configfiles, so an overlay cannot remove a base file's
    entry by leaving it out; it writes `terse: null` instead. A map whose every entry is removed is
    as if left out. Returns the removed keys (`generators.terse`)."""
    removed = []
    for key in NAMED:
        entries = config.get(key)
        if not isinstance(entries, dict):
            continue
        gone = [name for name, entry in entries.items() if entry is None]
        for name in gone:
            del entries[name]
            removed.append(f"{key}.{name}")
        if gone and not entries:
            del config[key]
    return removed


def non_finite(value, where: str = "") -> str | None:
    """The first number in `value` (a config or part of one) that is NaN or infinite, as `key: value`.
    JSON Schema's bounds compare false with NaN, so `price: .nan` would pass every one of them."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'config'}: {value} is not a finite number"
    if isinstance(value, dict):
        for k, v in value.items():
            found = non_finite(v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = non_finite(v, f"{where}[{i}]")
            if found:
                return found
    return None


def validate(config: dict, root=None) -> dict:
    """Coerce command-line strings, validate against the schema and fill in its defaults (in place)."""
    from snakemake.utils import validate as sm_validate

    coerce(config, schema(root))
    remove_nulls(config)
    bad = non_finite(config)
    if bad:
        raise InputError(f"{bad} (a YAML .nan or .inf): every number of the config must be finite")
    for key in ("generators", "datasets", "judges"):
        # Before validation, a key present is one the user wrote (the schema's {} comes after).
        if key in config and config[key] == {}:
            raise InputError(f"{key}: an empty map names nothing to run; leave it out for one entry")
    from snakemake.exceptions import WorkflowError

    try:
        sm_validate(config, str(_root(root) / SCHEMA), set_default=True)
    except WorkflowError as exc:  # name the key in one line rather than a traceback
        import jsonschema

        cause = next(
            (a for a in (*exc.args, exc.__cause__, exc.__context__) if isinstance(a, jsonschema.ValidationError)), None
        )
        if cause is None:
            raise
        where = ".".join(str(x) for x in cause.absolute_path) or "config"
        if where == "run" and cause.validator == "pattern":
            raise InputError(
                f"run: {cause.instance!r}: a name is letters, digits, '.', '_' and '-' only, and not '.' or '..'"
            ) from None
        raise InputError(f"{where}: {cause.message}") from None
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
    from snakemake.utils import update_config

    config: dict = {}
    for path in layers(configfiles, root):
        if not path.exists():
            raise InputError(f"{path}: config file not found")
        update_config(config, yaml.safe_load(path.read_text()) or {})
    if overrides:
        from snakemake.cli import parse_config  # about 1 CPU-s of imports (Snakemake's API): only when needed

        try:
            update_config(config, parse_config(list(overrides)))
        except ValueError as exc:
            raise InputError(f"--config: {exc}") from None
    return validate(config, root)


def _plugin_module_name(path: Path) -> str:
    """A module name of its own for each plugin file: two files both called modes.py in different
    folders are two modules (keyed by the resolved path), and one file imported twice is one."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"genjudge_plugin_{path.stem}_{digest}"


def plugin_files(config: dict) -> list[str]:
    """The files of the config's plugins (a module name: the file it imports from): a judge's mode may
    come from one, so the jobs that use modes take them as inputs and editing one reruns them."""
    out = []
    for entry in config.get("plugins") or []:
        if entry.endswith(".py"):
            out.append(entry)
            continue
        try:
            spec = importlib.util.find_spec(entry)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and Path(spec.origin).is_file():
            out.append(spec.origin)
    return out


def load_plugins(config: dict) -> None:
    """Import the modules listed under `plugins` (Python files or module names); they register modes."""
    import_plugins(config.get("plugins") or [])


def import_plugins(entries) -> None:
    """Import each plugin (a Python file or a module name), once per process."""
    for entry in entries:
        if entry.endswith(".py"):
            path = Path(entry)
            if not path.exists():
                raise InputError(f"plugins: {entry!r} not found")
            name = _plugin_module_name(path)
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
