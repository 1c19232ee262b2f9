"""What a whole run needs checked before a job starts or a model loads: datasets and their fields,
models, templates against the turns they grade, judges' datasets and generators, panels, labels.
Every error names the key the user wrote (or the file, line and field)."""

from __future__ import annotations

import datetime
import importlib.util
import os
from pathlib import Path

from genjudge.config.checks_data import category_hint, check_data
from genjudge.config.experiment import entry_key
from genjudge.config.validation import DEMO, load_plugins
from genjudge.errors import InputError


def judge_template(config: dict) -> str:
    """The configured template, or the mode's own."""
    from genjudge.judging import modes

    load_plugins(config)
    judge = config["judge"]
    return judge["template"] or modes.get(judge["mode"]).default_template()


DEMO_MODELS = ("demo-generator", "demo-judge")  # what rule demo_model builds when missing


def is_demo_model(name: str) -> bool:
    """models/demo-*: a demo model, or a copy of one."""
    parts = os.path.normpath(name).split(os.sep)
    return len(parts) == 2 and parts[0] == "models" and parts[1].startswith("demo-")


def builds_demo_model(name: str) -> bool:
    """models/demo-generator and models/demo-judge are built by rule demo_model when missing."""
    return is_demo_model(name) and os.path.normpath(name).split(os.sep)[1] in DEMO_MODELS


def _rekey(message: str, config: dict, name: str) -> str:
    """A mode's error names its key under `judge.`; say the key of judge `name` the user wrote."""
    head, sep, rest = message.partition(":")
    if sep and head.startswith("judge.") and head.count(".") == 1:
        return f"{entry_key(config, 'judge', name, head.split('.', 1)[1])}:{rest}"
    return message


DEMO_DIR = "config/demo"


def check_not_demo_template(template: str, model: str, where: str = "judge.template") -> None:
    """The demo's compact template was trained into the tiny demo judge; a real judge prompted
    with it never writes the verdict line the parser looks for."""
    parts = Path(os.path.normpath(template)).parts
    if tuple(parts[:2]) == tuple(Path(DEMO_DIR).parts) and not is_demo_model(model):
        raise InputError(
            f"{where}: {template} is the demo judge's compact template (it never asks for "
            f"a verdict line); judge.model {model!r} is not a demo model: set judge.template to null "
            "for the mode's own template (config/templates/<mode>.txt) or to a template of yours"
        )


def check(config: dict, data: bool = True, loadable: bool = True) -> None:
    """Everything that can be wrong before a job starts or a model loads; raises InputError
    naming the key, file, line and field. `data=False` skips reading the datasets; `loadable=False`
    asks of each local model directory its config.json only (models.modelref.check_model)."""
    from genjudge.config.experiment import resolve
    from genjudge.models.modelref import check_model

    required = {
        "run": config["run"],
        "dataset.path": config["dataset"]["path"],
        "generator.model": config["generator"]["model"],
        "judge.model": config["judge"]["model"],
    }
    maps = {"dataset.path": "datasets", "generator.model": "generators", "judge.model": "judges"}
    unset = [k for k, v in required.items() if v is None and not config.get(maps.get(k, ""))]
    if unset:
        raise InputError(
            f"{', '.join(unset)}: not set; every run names them (config/README.md; {DEMO} is a complete example)"
        )
    if config.get("chat_date") is not None:  # the schema checked its shape, not that the day exists
        try:
            datetime.date.fromisoformat(config["chat_date"])
        except ValueError:
            raise InputError(f"chat_date: {config['chat_date']!r} is not a date (YYYY-MM-DD)") from None
    load_plugins(config)
    exp = resolve(config)
    from genjudge.cluster.job_resources import check_node_gpus
    from genjudge.config.job_settings import gpu_requests, slurm_from_config

    check_node_gpus(slurm_from_config(config), gpu_requests(config, exp))
    for kind, entries in (("datasets", exp.datasets), ("generators", exp.generators), ("judges", exp.judges)):
        for name, section in entries.items():
            where = f"{kind}.{name}" if config.get(kind) else kind[:-1]
            key = "path" if kind == "datasets" else "model"
            if section[key] is None and not section.get("answers_from"):  # read from the dataset: no model
                raise InputError(f"{where}.{key}: not set")
    check_answer_rules(config, exp)
    for name, section in exp.generators.items():
        if section["n_samples"] > 1 and not section["do_sample"]:
            where = entry_key(config, "generator", name, "n_samples")
            # do_sample belongs beside n_samples, unless the entry itself turns it off
            fix = entry_key(config, "generator", name, "do_sample")
            if fix == "generator.do_sample":
                fix = f"{where.rsplit('.', 1)[0]}.do_sample"
            raise InputError(
                f"{where} = {section['n_samples']} needs {fix}: true (greedy samples would all be the same text)"
            )
    from genjudge.judging.panels import resolve_panels

    resolve_panels(config.get("panels") or {}, exp)
    conversations, no_category = check_data(config, exp) if data else (None, None)
    from genjudge.config.specs import GeneratorSpec, JudgeSpec
    from genjudge.models.vllm_support import check_spec as check_vllm

    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            model = section["model"]
            where = entry_key(config, kind, name, "model")
            if section["engine"] == "openai":  # no files here: the job's capability probe asks the endpoint
                check_endpoint(config, kind, name, section)
                continue
            if section.get("answers_from"):  # answers read from a field of the dataset: no model to check
                continue
            if is_demo_model(model) and not builds_demo_model(model) and not os.path.isdir(model):
                raise InputError(
                    f"{where}: {model!r} does not exist (the workflow builds only "
                    f"{' and '.join(f'models/{m}' for m in DEMO_MODELS)})"
                )
            check_model(model, where.rsplit(".", 1)[0], buildable=builds_demo_model(model), loadable=loadable)
            if section["engine"] == "vllm":
                check_vllm(
                    (GeneratorSpec if kind == "generator" else JudgeSpec).from_config(section), where.rsplit(".", 1)[0]
                )
    for name, section in exp.judges.items():
        try:
            check_judge(config, exp, name, section, conversations, no_category)
        except InputError as exc:
            raise InputError(_rekey(str(exc), config, name)) from None


def check_answer_rules(config: dict, exp) -> None:
    """Every extraction method of each dataset's `answer` (plain and by category) is built in or a regex
    with one group, and no rule of `answer.by_category` lists a category an earlier one lists (the first
    rule listing a category applies: the later listing never would)."""
    from genjudge.judging.answer_rules import methods_of
    from genjudge.judging.extraction import check_method

    for name, section in exp.datasets.items():
        for key, method in methods_of(section["answer"]):
            try:
                check_method(method)
            except ValueError as exc:
                head, bracket, rest = key.partition("[")  # by_category[i].side: the list's key, then the index
                where = entry_key(config, "dataset", name, f"answer.{head}") + bracket + rest
                raise InputError(f"{where}: {exc}") from None
        key = entry_key(config, "dataset", name, "answer.by_category")
        listed: dict = {}
        for i, rule in enumerate(section["answer"].get("by_category") or []):
            again = [c for c in rule["categories"] if c in listed]
            if again:
                raise InputError(
                    f"{key}[{i}].categories: {again[0]!r} is listed in {key}[{listed[again[0]]}] already, which "
                    "applies to its items (the first rule listing a category applies)"
                )
            listed.update(dict.fromkeys(rule["categories"], i))


def _covers(a, b) -> bool:
    """Whether rule `a` matches every item rule `b` matches (whatever the data)."""
    cats = a.categories is None or (b.categories is not None and set(b.categories) <= set(a.categories))
    return cats and (a.turns is None or (b.turns is not None and set(b.turns) <= set(a.turns)))


def _judged_categories(exp, judges, conversations: dict) -> list[str]:
    datasets = dict.fromkeys(c.dataset for j in judges for c in exp.cells(j))
    return sorted({str(cat) for d in datasets for cat, _ in conversations[d] if cat is not None})


def check_rules_apply(
    rules, key: str, exp, judge: str, conversations: dict, config: dict | None = None, no_category: dict | None = None
) -> None:
    """Every rule of `judge.templates` can choose the template of some item the judge grades. A rule
    an earlier one covers, or one naming turns beyond every item's, is refused; so is each category
    of a rule that is a near miss of a graded category the rule does not list (a typo, or another
    case: categories match exactly), with a did-you-mean, and a `dataset.fields.category` that is in
    no row of a dataset the judge grades (`no_category`: dataset -> the error) while a rule that
    chooses by category applies to no item: the items a rule was written for would silently get
    judge.template. A category unlike any of
    the items' (a subset of a benchmark without it), or a rule the judges sharing it
    (`judge.templates`, inherited) use elsewhere, is said in a warning."""
    import logging

    seen = {
        (category, turn)
        for dataset in dict.fromkeys(c.dataset for c in exp.cells(judge))
        for category, n in conversations[dataset]
        for turn in range(1, n + 1)
    }
    categories = sorted({str(c) for c, _ in seen if c is not None})
    most = max((t for _, t in seen), default=1)
    # The judges whose items a list of rules was written for: this judge's own list, or every judge inheriting it.
    sharing = [j for j in exp.judges if config is None or entry_key(config, "judge", j, "templates") == key] or [judge]
    known = _judged_categories(exp, sharing, conversations)
    for i, rule in enumerate(rules):
        earlier = next((j for j in range(i) if _covers(rules[j], rule)), None)
        if earlier is not None:
            raise InputError(f"{key}[{i}]: {key}[{earlier}] matches every item it would: it never applies")
        if rule.categories:
            applies = [c for c in rule.categories if c in known]  # somewhere among the sharing judges' items
            if not applies:
                for dataset in dict.fromkeys(c.dataset for c in exp.cells(judge)):
                    if (no_category or {}).get(dataset):
                        raise InputError(
                            f"{no_category[dataset]}, and {key}[{i}].categories chooses templates by category: "
                            "name the field holding the items' categories (null for a dataset without them)"
                        )
            unknown = [c for c in rule.categories if c not in known]
            # A near miss of a category the items have and the rule does not list (a typo, another case)
            # is refused: its items would silently get judge.template. One unlike any of theirs (a
            # subset of a benchmark without it: MATH's Algebra beside Prealgebra) is said in a warning.
            others = [c for c in known if c not in rule.categories]
            typos = [c for c in unknown if category_hint(c, others)]
            if typos:
                shown = ", ".join(f"{c!r}{category_hint(c, others)}" for c in typos)
                whose = "this judge grades" if len(sharing) == 1 else f"the judges {sharing} grade"
                raise InputError(
                    f"{key}[{i}].categories: {shown}: no item {whose} has {'it' if len(typos) == 1 else 'them'} "
                    f"as its category (the items' categories: {known}; categories match exactly, case included)"
                )
            if unknown and any(rule.matches(c, t) for c, t in seen):
                logging.getLogger("genjudge.config").warning(
                    "%s[%d].categories: %s match no item this judge grades (the items' categories: %s)",
                    key,
                    i,
                    unknown,
                    known,
                )
        if any(rule.matches(c, t) for c, t in seen):
            continue
        what = (
            f"matches no item this judge grades (categories {list(rule.categories or ['any'])}, turns "
            f"{list(rule.turns or ['any'])}; the items have the categories {categories} and "
            f"{'up to ' + str(most) + ' turns' if most > 1 else 'one turn each'})"
        )
        if rule.turns and min(rule.turns) > most:
            raise InputError(f"{key}[{i}]: {what}")
        logging.getLogger("genjudge.config").warning("%s[%d] %s", key, i, what)


def check_endpoint(config: dict, kind: str, name: str, section: dict) -> None:
    """A model behind an endpoint (`engine: openai`): its URL, and the settings it cannot honour."""
    from genjudge.models.endpoints import check_url, output_bound

    def key(k):
        return entry_key(config, kind, name, k)

    e = section["endpoint"]
    where = key("endpoint.base_url").rsplit(".", 1)[0]
    if importlib.util.find_spec("openai") is None:  # named now, not as a ModuleNotFoundError in the job
        raise InputError(
            f"{key('engine')}: openai needs the Python package openai, which this environment lacks: "
            f"pip install openai (make setup installs it)"
        )
    check_url(e["base_url"], where, e["allow_http"])
    if kind == "judge" and e.get("on_filtered") == "count_wrong":
        raise InputError(
            f"{key('endpoint.on_filtered')}: count_wrong grades a generator's withheld answer as wrong; a judge's "
            f"withheld reply is never turned into a verdict: use fail (the item is left for a rerun)"
        )
    if section["use_chat_template"] is False:
        raise InputError(
            f"{key('use_chat_template')}: false needs a local model; an endpoint applies its own chat template "
            f"to the messages it receives (engine: openai)"
        )
    price = section["price"]
    if section["max_cost_usd"] is not None and (price["input_per_mtok"] is None or price["output_per_mtok"] is None):
        raise InputError(
            f"{key('max_cost_usd')}: a budget needs the model's price: set {key('price').rsplit('.', 1)[0]}.price"
            f".input_per_mtok and .output_per_mtok (US dollars per million tokens)"
        )
    # The budget sets each request's worst case aside before it is sent; an endpoint's context is not known.
    if section["max_cost_usd"] is not None and output_bound(section["max_new_tokens"], e["extra_body"]) is None:
        raise InputError(
            f"{key('endpoint.extra_body')}: max_tokens: null without max_completion_tokens leaves each request's "
            f"output unbounded, so {key('max_cost_usd')} cannot set a request's worst case aside: set "
            f"max_completion_tokens too (e.g. {{max_tokens: null, max_completion_tokens: 4096}})"
        )
    if kind == "judge" and section["parallel"] == "tensor":
        raise InputError(f"{key('parallel')}: tensor splits a local model over GPUs; engine: openai has none here")


def endpoint_warnings(config: dict, exp) -> list[str]:
    """What planning says of the endpoint models: names a provider may move to another model."""
    from genjudge.models.endpoints import moving_alias

    out = []
    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            if section["engine"] == "openai" and moving_alias(section["model"]):
                out.append(
                    f"{entry_key(config, kind, name, 'model')}: {section['model']!r} has no date or version in its "
                    f"name: its provider may move it to another model, and results keyed by the name would then "
                    f"mix two models; name a snapshot (e.g. gpt-4o-2024-08-06). Each result records the served "
                    f"model and system_fingerprint."
                )
    return out


def check_judge(
    config: dict, exp, name: str, section: dict, conversations: dict | None, no_category: dict | None = None
) -> None:
    """One judge's templates, pattern and settings. `conversations` maps each dataset to the
    (category, number of turns) of its items: every template is checked against the turns it
    will be used for; None (the datasets not read): each template on its own. `no_category` maps a
    dataset whose `fields.category` is in no row to the error saying so (check_rules_apply)."""
    from genjudge.config.specs import JudgeSpec
    from genjudge.judging import modes
    from genjudge.judging.template_rules import Templates
    from genjudge.judging.templates import check_turns

    spec = JudgeSpec.from_config(section)
    mode = modes.get(spec.mode)
    default = judge_template({**config, "judge": section})
    keys = {default: entry_key(config, "judge", name, "template") if section["template"] else "judge.mode"}
    rules_key = entry_key(config, "judge", name, "templates")
    for i, rule in enumerate(spec.templates or []):
        keys.setdefault(rule["template"], f"{rules_key}[{i}].template")
    for path, where in keys.items():
        check_not_demo_template(path, spec.model, where)
    templates = Templates(default, spec.templates, mode, keys)
    if conversations is not None:
        turns: dict = {}
        for dataset in dict.fromkeys(c.dataset for c in exp.cells(name)):
            for category, n in conversations[dataset]:
                for turn in range(1, n + 1):
                    turns.setdefault(templates.path_for(category, turn), set()).add(turn)
        for path, seen in turns.items():
            check_turns(templates.texts[path], path, mode, seen, keys[path])
        check_rules_apply(templates.rules, rules_key, exp, name, conversations, config, no_category)
    lo, hi = spec.score_range
    if mode.scored_in_range and not lo < hi:
        raise InputError(
            f"{entry_key(config, 'judge', name, 'score_range')}: {spec.score_range} is [low, high] with low < high "
            f"(every score would be outside it, so every verdict unparsed); e.g. [{min(lo, hi):g}, {max(lo, hi):g}]"
        )
    if spec.verdict_pattern:
        try:
            mode.compile(spec.verdict_pattern)
        except Exception as exc:
            raise InputError(f"{entry_key(config, 'judge', name, 'verdict_pattern')}: {exc}") from None
    mode.check(spec)
