"""An experiment: named generators x datasets, graded by named judges.

The config's `generator`, `dataset` and `judge` sections are the defaults every
named entry of `generators:`, `datasets:` and `judges:` starts from. Without a
map there is one entry, named after the section's model (or dataset file), so a
single-run config is an experiment of one cell. Each entry is validated like the
section it extends.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from genjudge.errors import InputError

# A name is a path component of results/<run>/...: never `.` or `..`.
NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]+$")
MAPS = {"generators": "generator", "datasets": "dataset", "judges": "judge"}


@dataclass(frozen=True)
class Cell:
    """What one judge grades: a generator's answers on a dataset (pairwise: against an opponent)."""

    generator: str
    dataset: str
    opponent: str | None = None  # a generator's name; None: judge.baseline is an outside file

    @property
    def key(self) -> str:
        return "/".join(x for x in (self.generator, self.dataset) if x) + (
            f" vs {self.opponent}" if self.opponent else ""
        )


def default_name(value: str | None) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct` -> `Llama-3.1-8B-Instruct`; `data/gsm8k.jsonl` -> `gsm8k`."""
    if not value:
        return "default"
    p = Path(str(value).rstrip("/"))
    base = p.stem if p.suffix in (".jsonl", ".json", ".csv", ".tsv", ".parquet", ".pq", ".ndjson") else p.name
    name = re.sub(r"[^A-Za-z0-9._-]", "-", base)
    return name if NAME.match(name) else "default"


def _validate_entry(section_schema: dict, entry: dict, where: str) -> None:
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(section_schema).iter_errors(entry), key=lambda e: e.path)
    if errors:
        e = errors[0]
        at = ".".join(str(x) for x in e.path)
        raise InputError(f"{where}{'.' + at if at else ''}: {e.message}")


@dataclass(frozen=True)
class Experiment:
    generators: dict  # name -> full generator section
    datasets: dict  # name -> full dataset section
    judges: dict  # name -> full judge section
    skipped: dict = field(default_factory=dict)  # judge -> cells left out (their answers or the judge failed)

    def shards(self, dataset: str, config: dict) -> int:
        n = self.datasets[dataset]["shards"]
        return config["shards"] if n is None else n

    def gpus_per_job(self, generator: str, config: dict) -> int:
        n = self.generators[generator]["gpus_per_job"]
        return config["gpus_per_job"] if n is None else n

    def judge_generators(self, judge: str) -> list[str]:
        """The generators `judge` grades (`judges.<name>.generators`; null: all), in config order."""
        only = self.judges[judge].get("generators")
        return [g for g in self.generators if only is None or g in only]

    def judge_datasets(self, judge: str) -> list[str]:
        """The datasets `judge` grades (`judges.<name>.datasets`; null: all), in config order."""
        only = self.judges[judge].get("datasets")
        return [d for d in self.datasets if only is None or d in only]

    def cells(self, judge: str) -> list[Cell]:
        """What `judge` grades, in a fixed order, less its `skipped` cells."""
        from genjudge.judging import modes

        section = self.judges[judge]
        names = self.judge_generators(judge)
        base = section["baseline"]
        out = []
        for ds in self.judge_datasets(judge):
            paired = modes.get(section["mode"]).needs_baseline
            if not paired or base not in self.generators and section["pairs"] == "baseline":
                # single-answer modes, or pairwise against an outside file
                out += [Cell(g, ds) for g in names]
            elif section["pairs"] == "baseline":
                out += [Cell(g, ds, base) for g in names if g != base]
            else:
                out += [Cell(a, ds, b) for i, a in enumerate(names) for b in names[i + 1 :]]
        skipped = self.skipped.get(judge, ())
        return [c for c in out if c not in skipped]

    def generated(self) -> list[tuple[str, str]]:
        """(generator, dataset) pairs some judge reads (graded, or a pairwise opponent), in config order:
        the generation jobs the run makes."""
        wanted = {(g, c.dataset) for j in self.judges for c in self.cells(j) for g in (c.generator, c.opponent) if g}
        return [(g, d) for g in self.generators for d in self.datasets if (g, d) in wanted]

    def datasets_of(self, generator: str) -> list[str]:
        """The datasets `generator` answers (those of the judges grading it)."""
        return [d for g, d in self.generated() if g == generator]

    def without(self, skipped: dict) -> Experiment:
        """The same experiment with `skipped` (judge -> cells) left out of `cells` (genjudge.store.failures)."""
        more = {j: frozenset(self.skipped.get(j, ())) | frozenset(cs) for j, cs in skipped.items()}
        return replace(self, skipped={**self.skipped, **more})


def of_cell(df, cell: Cell):
    """The rows of a frame with generator/dataset/opponent columns that belong to `cell`."""
    return df[
        (df["generator"] == cell.generator)
        & (df["dataset"] == cell.dataset)
        & (df["opponent"].fillna("") == (cell.opponent or ""))
    ]


def cell_generations(cells: list[Cell], generations: dict):
    """(cell, its generator's merged answers on its dataset) for each cell, each file read once."""
    import pandas as pd

    from genjudge.data.samples import with_sample

    read: dict = {}
    for cell in cells:
        key = (cell.generator, cell.dataset)
        if key not in read:
            read[key] = with_sample(pd.read_parquet(generations[key]))
        yield cell, read[key]


def merged_generations(results: str, generator: str, dataset: str) -> str:
    """Where a generator's merged answers on a dataset live."""
    return f"{results}/generations/{generator}/{dataset}.parquet"


def judge_inputs(exp: Experiment, judge: str, results: str) -> dict:
    """(generator, dataset) -> merged generations a judge reads: its cells' and, pairwise, their opponents'."""
    paths = {}
    for cell in exp.cells(judge):
        for g in (cell.generator, cell.opponent):
            if g:
                paths[(g, cell.dataset)] = merged_generations(results, g, cell.dataset)
    return paths


def resolve(config: dict, schema: dict | None = None, check_pairs: bool = True) -> Experiment:
    """The named entries, each the section's settings with the entry's over them; validated.
    Loads the config's plugins first: judges may use their modes. `check_pairs=False` skips the
    pairwise judges' baseline checks (for writing the baseline file itself)."""
    from snakemake.utils import update_config

    from genjudge.config.validation import coerce, load_plugins
    from genjudge.config.validation import schema as load_schema

    load_plugins(config)
    if schema is None:
        schema = load_schema()
    parts = {}
    for map_key, section in MAPS.items():
        entries = config.get(map_key) or {}
        if not isinstance(entries, dict):
            raise InputError(f"{map_key}: expected a map from names to settings")
        entries = {k: v for k, v in entries.items() if v is not None}  # null: removed (config.remove_nulls)
        if not entries:
            base = config[section]
            name = default_name(base.get("path") if section == "dataset" else base.get("model"))
            parts[map_key] = {name: copy.deepcopy(base)}
            continue
        resolved = {}
        for name, entry in entries.items():
            if not NAME.match(str(name)):
                raise InputError(
                    f"{map_key}.{name}: a name is letters, digits, '.', '_' and '-' only, and not '.' or '..'"
                )
            if not isinstance(entry, dict):
                raise InputError(f"{map_key}.{name}: expected a map of {section} settings")
            merged = copy.deepcopy(config[section])
            update_config(merged, coerce(copy.deepcopy(entry), schema["properties"][section]))
            _validate_entry(schema["properties"][section], merged, f"{map_key}.{name}")
            resolved[str(name)] = merged
        parts[map_key] = resolved
    exp = Experiment(**parts)
    _check_filters(exp, config)
    if check_pairs:
        _check_pairs(exp, config)
    _check_read(exp)
    return exp


def entry_key(config: dict, section: str, name: str, key: str) -> str:
    """The config key a setting of one named entry was written under: `judges.b.template` when
    the entry sets it, else `judge.template` (the section every entry starts from), whether the
    run has one judge or several. A dotted key (`answer.reference`, `fields.prompt`) is looked up
    level by level: `datasets.d.answer.reference` only when the entry writes that nested key."""
    entry = (config.get(f"{section}s") or {}).get(name) or {}
    for part in key.split("."):
        if not isinstance(entry, dict) or part not in entry:
            return f"{section}.{key}"
        entry = entry[part]
    return f"{section}s.{name}.{key}"


def entry_keys(config: dict, section: str, names, key: str) -> dict[str, str]:
    """name -> `entry_key` of each of `names`: the keys as written, for the errors of code below the config."""
    return {name: entry_key(config, section, name, key) for name in names}


def entry_where(config: dict, section: str, name: str) -> str:
    """Where a setting the entry lacks belongs: `judges.b` when the config names its judges, else `judge`."""
    return f"{section}s.{name}" if (config.get(f"{section}s") or {}).get(name) is not None else section


def _check_filters(exp: Experiment, config: dict) -> None:
    """Each judge's `datasets` and `generators` name entries of the run; every entry is read by a judge."""
    for jname, j in exp.judges.items():
        for key, entries in (("datasets", exp.datasets), ("generators", exp.generators)):
            unknown = [n for n in j.get(key) or [] if n not in entries]
            if unknown:
                where = entry_key(config, "judge", jname, key)
                raise InputError(f"{where}: {unknown} not among the {key} {list(entries)}")


def _check_read(exp: Experiment) -> None:
    """Every generator and dataset is read by some judge: one no judge reads is a mistake, not work to do."""
    generated = exp.generated()
    for key, entries, pos in (("datasets", exp.datasets, 1), ("generators", exp.generators, 0)):
        idle = [n for n in entries if all(pair[pos] != n for pair in generated)]
        if idle:
            raise InputError(
                f"{key}.{idle[0]}: no judge reads it (each judge's `{key}` leaves it out); "
                f"remove it (`{idle[0]}: null` in an overlay) or name it in a judge's {key}"
            )


def _check_pairs(exp: Experiment, config: dict) -> None:
    from genjudge.judging import modes

    for jname, j in exp.judges.items():
        if not modes.get(j["mode"]).needs_baseline:
            continue
        names = exp.judge_generators(jname)
        if j["pairs"] == "all":
            if len(names) < 2:
                where = entry_key(config, "judge", jname, "pairs")
                raise InputError(f"{where}: all needs at least two generators (have {names})")
            continue
        base = j["baseline"]
        if not base:
            raise InputError(
                f"{entry_where(config, 'judge', jname)}.baseline: pairwise mode needs a baseline: the name of one of "
                f"the generators {list(exp.generators)}, or a generations parquet file"
            )
        where = entry_key(config, "judge", jname, "baseline").rsplit(".", 1)[0]
        looks_like_file = "/" in base or base.endswith((".parquet", ".pq"))
        if base not in exp.generators and not looks_like_file:
            raise InputError(
                f"{where}.baseline: {base!r} is not one of the generators {list(exp.generators)} (nor a parquet file)"
            )
        if base in exp.generators:
            if not [g for g in names if g != base]:
                raise InputError(f"{where}.baseline: {base!r} is the only generator; nothing to compare it with")
            continue
        datasets = exp.judge_datasets(jname)
        if len(datasets) > 1:
            raise InputError(
                f"{where}.baseline: a baseline file holds one dataset's answers, and this judge grades "
                f"{len(datasets)} datasets {datasets}: name a generator of the run "
                f"as the baseline, or limit the judge to one dataset ({entry_where(config, 'judge', jname)}.datasets)"
            )
        if not Path(base).exists():
            raise InputError(f"{where}.baseline: {base!r} not found; run the baseline first")
