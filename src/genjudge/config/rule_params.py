"""The generate and judge rules' rerun settings as Snakemake params, computed once per invocation.

Each setting is a param of its own, written `key=value`, so that a rerun's reason names only the
settings that changed, on one line. Snakemake calls a callable param once per job and inspects its
signature several times more: at 10,000 shards the generate rule's 25 callables were most of a dry
run's time (docs/performance.md). So the settings are computed here for every cell the rule's
wildcards can name (each generator x dataset, each judge): a setting with one value in every cell is a
plain value, which Snakemake calls nothing for; the others are functions that look the job's cell up.
The count of a job's recorded failures, the one setting of a single job, is a plain None while no job
of the rule recorded one.
"""

from __future__ import annotations

import inspect
import json

FAILED = "failed_attempts"


def as_param(key: str, value) -> str | None:
    """`key=value` (JSON for what is not text), or None where the job has no such setting."""
    if value is None:
        return None
    return f"{key}={value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)}"


def plain(value) -> bool:
    """Whether Snakemake keeps a plain param as it is: it fills `{name}` patterns of a plain string
    with the job's wildcards (and fails on a name that is none of them)."""
    from snakemake.io import WILDCARD_REGEX

    return not isinstance(value, str) or WILDCARD_REGEX.search(value) is None


def rerun_settings(params, keys, cells: list[dict], *, name: str, failed: dict, job_id) -> dict:
    """One rule param per key (static `keys`): a plain value where every cell has the same one, else a
    function of the job's wildcards. `params(cell)` gives a cell's settings, the cell's wildcards as
    attributes (it runs once per cell); `cells` are every combination of the wildcards the settings
    depend on; `failed` maps a job's id (`job_id(wildcards)`) to its recorded failures
    (genjudge.store.failures.recorded_attempts)."""
    from types import SimpleNamespace

    from snakemake.exceptions import WorkflowError

    by_cell = {}
    for cell in cells:
        values = params(SimpleNamespace(**cell))
        unknown = sorted(set(values) - set(keys))
        if unknown:  # a setting no param carries would never trigger a rerun
            raise WorkflowError(f"the {name} jobs' settings {unknown} are not among their rerun params")
        by_cell[tuple(cell.items())] = {key: as_param(key, values.get(key)) for key in keys}

    def varying(key):
        def value(wildcards):
            if key == FAILED:
                return as_param(key, failed.get(job_id(wildcards)))
            cell = tuple((k, getattr(wildcards, k)) for k, _ in next(iter(by_cell)))
            return by_cell[cell][key]

        value.__name__ = f"{name}_{key}"
        return value

    out = {}
    for key in keys:
        seen = {values[key] for values in by_cell.values()}
        if key == FAILED:
            constant = not failed and not seen - {None}
        else:
            constant = len(seen) == 1 and plain(next(iter(seen)))
        out[key] = next(iter(seen)) if constant else varying(key)
    return out


def remember_signatures(rules) -> int:
    """Give each function a rule's input, params or resources call its signature's parameters once
    (Snakemake's `_overwrite_params`, which `snakemake.common.overwrite_function_params` sets):
    Snakemake otherwise computes `inspect.signature` of every such function two to four times per
    job, and of its own `Resource.evaluate` once per resource of every job. Returns how many of the
    rules' functions it saw; where Snakemake keeps its rules otherwise, it sees none and changes
    nothing."""
    from snakemake.resources import Resource

    if not hasattr(Resource.evaluate, "_overwrite_params"):  # the same for every resource: its bound form's
        Resource.evaluate._overwrite_params = inspect.signature(Resource("cores", 1).evaluate).parameters
    seen = 0
    for rule in rules:
        funcs = [item for part in (rule.input, rule.params) for _, item in _items(part)]
        funcs += [getattr(res, "_evaluator", None) for res in _resources(rule)]
        for func in funcs:
            func = getattr(getattr(func, "_file", None), "callable", None) or getattr(func, "callable", None) or func
            if inspect.isfunction(func) and not hasattr(func, "_overwrite_params"):
                func._overwrite_params = inspect.signature(func).parameters
                seen += 1
    return seen


def _items(part):
    items = getattr(part, "_allitems", None)
    return list(items()) if items else []


def _resources(rule) -> list:
    values = getattr(getattr(rule, "resources", None), "values", None)
    return list(values()) if callable(values) else []
