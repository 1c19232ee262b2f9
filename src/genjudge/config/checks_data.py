"""The checks of a run that read its datasets' items (genjudge.config.checks.check with `data`): fields,
shards, references, categories of the answer rules, a pairwise baseline file, the fields a mode reads.
Every error names the key the user wrote (or the file, line and field)."""

from __future__ import annotations

import logging

from genjudge.config.experiment import entry_key
from genjudge.errors import InputError


def check_data(config: dict, exp) -> tuple[dict, dict]:
    """The checks that read the datasets' items: their fields, shards, references, categories, a pairwise
    baseline file, the fields a mode reads, labels. Returns (conversations: dataset -> the (category,
    number of turns) of its items; no_category: dataset -> the error of a `fields.category` in no row),
    for the judges' checks (check_judge)."""
    from genjudge.config.specs import DatasetSpec
    from genjudge.data.conversation import any_reference, n_turns
    from genjudge.data.dataset import is_missing, load_items
    from genjudge.data.sharding import shard_bounds
    from genjudge.judging.labels import check_config_labels

    n_items, ids, with_reference, conversations, turns, no_category = {}, {}, {}, {}, {}, {}
    lacking: dict = {}  # dataset -> per-item field (rubric) -> the ids of items without it
    for name, section in exp.datasets.items():
        ds = DatasetSpec.from_config(section)
        keys = {f: entry_key(config, "dataset", name, f"fields.{f}") for f in ("id", "prompt", "reference", "category")}
        report: dict = {}
        items = load_items(ds.path, ds.fields, ds.format, ds.hf, keys=keys, report=report)
        item_ids, item_turns = items["id"].tolist(), n_turns(items)  # lists: iterating the columns is slower
        ids[name] = set(item_ids)
        warn_repeated(config, name, items)
        turns[name] = dict(zip(item_ids, item_turns))
        categories = (None if is_missing(c) else c for c in items["category"].tolist())
        conversations[name] = set(zip(categories, item_turns))
        n_items[name], with_reference[name] = len(items), any_reference(items)
        lacking[name] = {c: items["id"][items[c].isna()].tolist() for c in ("rubric",)}
        if "category" in report["in_no_row"]:
            no_category[name] = (
                f"{keys['category']}: the field {report['in_no_row']['category']!r} is in no row of {ds.path} "
                f"(the first row's fields: {report['first_row_fields']})"
            )
        shard_bounds(n_items[name], exp.shards(name, config))
    check_references(config, exp, with_reference)
    check_answer_categories(config, exp, {d: {c for c, _ in conversations[d]} for d in exp.datasets}, no_category)
    for name, section in exp.judges.items():
        graded = sum(n_items[c.dataset] * exp.generators[c.generator]["n_samples"] for c in exp.cells(name))
        if section["shards"] > graded:
            raise InputError(
                f"{entry_key(config, 'judge', name, 'shards')} = {section['shards']} is more than the {graded} "
                f"answers judge {name!r} grades; use shards <= {graded}"
            )
        check_baseline_file(config, exp, name, turns)
        check_item_fields(config, exp, name, lacking)
    check_config_labels(exp, ids, bool(config.get("judges")))
    return conversations, no_category


def check_references(config: dict, exp, with_reference: dict) -> None:
    """A judge that grades against references, on a dataset where no item has one, could only
    grade against "(none)": refused while planning. (Items of a dataset where only some lack
    one are reported as "no reference", not judged.)"""
    from genjudge.judging import modes

    for jname, section in exp.judges.items():
        if not modes.get(section["mode"]).needs_reference:
            continue
        for dataset in dict.fromkeys(c.dataset for c in exp.cells(jname)):
            if with_reference[dataset]:
                continue
            field = exp.datasets[dataset]["fields"].get("reference")
            where = f"datasets.{dataset}" if config.get("datasets") else "dataset"
            key = entry_key(config, "dataset", dataset, "fields.reference")
            why = f"no item has a value in its field {field!r} ({key})" if field else f"{key} is null"
            raise InputError(
                f"{where}: judge mode {section['mode']!r} grades against a reference answer, and {why} "
                f"({exp.datasets[dataset]['path']}); set {where}.fields.reference to the field holding the "
                "answers, or use judge.mode score (no reference needed)"
            )


SHOWN_REPEATS = 3  # pairs of a repeated question named in the warning (all are counted)


def warn_repeated(config: dict, name: str, items) -> None:
    """Say, while planning, which items repeat another item's question (the same prompt, the same turns):
    each is asked once and its answer shared, so a run reports them as shared, never as resumed."""
    seen: dict = {}
    repeats = []
    extra = [items[c].tolist() if c in items else [None] * len(items) for c in ("messages", "turns")]
    for item_id, prompt, messages, turns in zip(items["id"].tolist(), items["prompt"].tolist(), *extra):
        key = (prompt, messages, turns)  # texts (messages and turns as JSON) or None
        if key in seen:
            repeats.append((item_id, seen[key]))
        else:
            seen[key] = item_id
    if repeats:
        shown = ", ".join(f"{a!r} repeats {b!r}" for a, b in repeats[:SHOWN_REPEATS])
        logging.getLogger("genjudge.config").warning(
            "%s: %d item(s) repeat another item's question (%s%s): each is generated once and shares the first's "
            "answer (counted as shared in this run, not resumed); remove them where they were not meant",
            entry_key(config, "dataset", name, "path"),
            len(repeats),
            shown,
            ", ..." if len(repeats) > SHOWN_REPEATS else "",
        )


def check_baseline_file(config: dict, exp, name: str, turns: dict) -> None:
    """A pairwise judge's outside baseline file (`judge.baseline` naming a generations parquet, not
    a generator) holds an answer for every (id, turn) of the dataset it grades: checked while
    planning, reading only the file's id, turn and sample columns, rather than when the judge job
    meets the first missing id after every generation has run. `turns` maps each dataset to its
    items' number of turns by id."""
    from genjudge.judging import modes

    section = exp.judges[name]
    if not modes.get(section["mode"]).needs_baseline or section["pairs"] != "baseline":
        return
    path = section["baseline"]
    if not path or path in exp.generators:
        return
    import pyarrow.parquet as pq

    key = entry_key(config, "judge", name, "baseline")
    try:
        names = pq.read_schema(path).names
        table = pq.read_table(path, columns=[c for c in ("id", "turn", "sample") if c in names])
    except Exception as exc:  # pyarrow raises several types for a missing, damaged or foreign file
        raise InputError(
            f"{key}: {path} is not a readable Parquet file ({type(exc).__name__}: {exc}); the baseline is a "
            "generations file (results/<run>/generations/<generator>/<dataset>.parquet, or one `genjudge "
            "baseline` writes from a file of answers)"
        ) from None
    if "id" not in names:
        raise InputError(f"{key}: {path} has no column 'id' (its columns: {names}); it is no generations file")
    n = table.num_rows
    id_col = table.column("id").to_pylist()
    turn_col = table.column("turn").to_pylist() if "turn" in names else [1] * n
    sample_col = table.column("sample").to_pylist() if "sample" in names else [0] * n
    # The judge pairs each answer with the baseline's sample 0 (genjudge.data.samples.SampleView).
    have = {(i, int(t)) for i, t, s in zip(id_col, turn_col, sample_col) if t is not None and s in (0, None)}
    for dataset in dict.fromkeys(c.dataset for c in exp.cells(name)):
        wanted = [(i, t) for i, k in turns[dataset].items() for t in range(1, k + 1)]
        missing = [w for w in wanted if w not in have]
        if missing:
            shown = [i if t == 1 else (i, t) for i, t in missing[:5]]
            whose = "turn(s)" if any(t > 1 for _, t in missing) else "id(s)"
            id_type = table.schema.field("id").type
            typed = (
                "" if str(id_type) in ("string", "large_string") else f" (its ids are {id_type}, the items' are text)"
            )
            raise InputError(
                f"{key}: {path} has no answer for {len(missing)} {whose} of the dataset "
                f"{exp.datasets[dataset]['path']}, e.g. {shown}{typed}; the baseline needs an answer for every item "
                "(and turn) the judge grades"
            )


def check_answer_categories(config: dict, exp, categories: dict, no_category: dict) -> None:
    """Each category of a dataset's `answer.by_category` rules is one its items have, as `judge.templates`'
    rules are checked (`check_rules_apply`): one no item has that is a near miss of the items' categories
    (a typo, or another case) is refused with a did-you-mean, and so is a `dataset.fields.category` in no
    row where none of a rule's categories is there: those items would silently get the plain methods. A
    category unlike any of the items' is said in a warning. `categories`: dataset -> its items'
    categories (None: none)."""
    for name, section in exp.datasets.items():
        rules = section["answer"].get("by_category") or []
        key = entry_key(config, "dataset", name, "answer.by_category")
        # The datasets the rules were written for: every dataset inheriting them from `dataset`.
        sharing = [d for d in exp.datasets if entry_key(config, "dataset", d, "answer.by_category") == key]
        known = sorted({str(c) for d in sharing for c in categories[d] if c is not None})
        for i, rule in enumerate(rules):
            if not any(c in known for c in rule["categories"]) and no_category.get(name):
                raise InputError(
                    f"{no_category[name]}, and {key}[{i}].categories chooses the answer extraction by category: "
                    "name the field holding the items' categories (null for a dataset without them)"
                )
            unknown = [c for c in rule["categories"] if c not in known]
            others = [c for c in known if c not in rule["categories"]]
            typos = [c for c in unknown if category_hint(c, others)]
            if typos:
                shown = ", ".join(f"{c!r}{category_hint(c, others)}" for c in typos)
                whose = f"of {sharing[0]!r}" if len(sharing) == 1 else f"of the datasets {sharing}"
                raise InputError(
                    f"{key}[{i}].categories: {shown}: no item {whose} has {'it' if len(typos) == 1 else 'them'} "
                    f"as its category (the items' categories: {known}; categories match exactly, case included)"
                )
            if unknown:
                logging.getLogger("genjudge.config").warning(
                    "%s[%d].categories: %s match no item (the items' categories: %s)", key, i, unknown, known
                )


def category_hint(category: str, known) -> str:
    """` (did you mean 'math'?)` for a category that differs from one of `known` in case alone or by
    a typo (compared case-insensitively; the categories themselves are matched exactly)."""
    import difflib

    lowered: dict = {}
    for c in sorted(known):
        lowered.setdefault(c.lower(), c)
    if category.lower() in lowered:
        return f" (did you mean {lowered[category.lower()]!r}? the case differs)"
    near = difflib.get_close_matches(category.lower(), list(lowered), 1, 0.75)
    return f" (did you mean {lowered[near[0]]!r}?)" if near else ""


def check_item_fields(config: dict, exp, judge: str, lacking: dict) -> None:
    """A judge whose mode reads a field of every item (rubric: its rubric) grades only datasets that name
    the field, every item of which has one."""
    from genjudge.judging import modes

    mode = modes.get(exp.judges[judge]["mode"])
    for dataset in dict.fromkeys(c.dataset for c in exp.cells(judge)):
        for field in mode.item_fields:
            key = entry_key(config, "dataset", dataset, f"fields.{field}")
            if not exp.datasets[dataset]["fields"].get(field):
                raise InputError(
                    f"{key}: not set, and judge {judge!r} (mode {mode.name}) grades each item of dataset {dataset!r} "
                    f"against its {field}: name the field that holds it (HealthBench: rubrics)"
                )
            missing = lacking.get(dataset, {}).get(field) or []
            if missing:
                raise InputError(
                    f"{exp.datasets[dataset]['path']}: {len(missing)} item(s) have no {field} (field "
                    f"{exp.datasets[dataset]['fields'][field]!r}, {key}), e.g. {missing[:3]}; judge {judge!r} "
                    f"(mode {mode.name}) grades every item against its own"
                )
