"""Rules of the package layout that matter at run time, checked rather than stated."""

import ast
import re
import subprocess
import sys
from dataclasses import fields

import pytest
from judges import ROOT

from genjudge.store.records import GenerateMeta, JudgeMeta

PKG = ROOT / "src" / "genjudge"
HEAVY = {"torch", "transformers", "accelerate", "bitsandbytes"}
MODEL_CODE = {"engine", "demo"}


def modules_outside_model_code() -> list[str]:
    names = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in MODEL_CODE:
            continue
        parts = ["genjudge", *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def test_every_module_outside_engine_and_demo_imports_without_torch():
    # The GPU lease must run before CUDA starts: only engine/ (and demo/) may touch torch.
    code = (
        "import sys\n"
        f"for m in {sorted(HEAVY)!r}: sys.modules[m] = None  # import raises ImportError\n"
        "import importlib\n"
        f"for name in {modules_outside_model_code()!r}: importlib.import_module(name)\n"
        "print('ok', len(sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")


def test_no_module_outside_engine_and_demo_imports_torch_even_lazily():
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.relative_to(PKG).parts[0] in MODEL_CODE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in HEAVY]
    assert offenders == []


def python_of(path) -> tuple[ast.Module, dict[int, int]]:
    """A module's syntax tree; for a Snakefile or rules/*.smk, that of the Python Snakemake makes of it,
    with the map from its lines to the file's."""
    if path.suffix == ".py":
        return ast.parse(path.read_text()), {}
    from types import SimpleNamespace

    from snakemake.parser import parse

    source = SimpleNamespace(get_path_or_uri=lambda secret_free=True: str(path))
    workflow = SimpleNamespace(sourcecache=SimpleNamespace(open=lambda _: open(path)))  # noqa: SIM115 (parse closes it)
    lines: dict[int, int] = {}
    code, _ = parse(source, workflow, lines)
    return ast.parse(code), lines


def names_a_mode(node) -> bool:
    """`mode`, `x_mode`, `x.mode`, `x["mode"]`, `x.get("mode")`, `mode.name`."""
    if isinstance(node, ast.Name):
        return node.id == "mode" or node.id.endswith("_mode")
    if isinstance(node, ast.Attribute):
        return node.attr == "mode" or node.attr.endswith("_mode") or (node.attr == "name" and names_a_mode(node.value))
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "mode"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return isinstance(node.args[0], ast.Constant) and node.args[0].value == "mode"
    return False


def is_text(node) -> bool:
    """A string literal, or a tuple, list or set of them."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(map(is_text, node.elts))
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def mode_branches(path, root=ROOT) -> list[str]:
    """Each comparison of a mode's name with text (`==`, `!=`, `in (...)`, either side) and each `match` on it."""
    tree, lines = python_of(path)
    found = []
    for node in ast.walk(tree):
        hit = isinstance(node, ast.Match) and names_a_mode(node.subject)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            hit = any(
                names_a_mode(a) and is_text(b) or names_a_mode(b) and is_text(a) for a, b in zip(sides, sides[1:])
            )
        if hit:
            found.append(lines.get(node.lineno, node.lineno))
    text = path.read_text().splitlines()
    return [f"{path.relative_to(root)}:{line}: {text[line - 1].strip()}" for line in sorted(found)]


def test_no_branching_on_the_mode_name_outside_the_mode_objects():
    # A grading mode is one object (judging/modes/): code elsewhere asks it (`modes.get(name).needs_baseline`,
    # a method or attribute of JudgeMode) rather than testing its name, so that a new mode needs no edit there.
    paths = [p for p in (ROOT / "src").rglob("*.py") if "modes" not in p.relative_to(ROOT).parts]
    paths += [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    hits = [hit for path in sorted(paths) for hit in mode_branches(path)]
    assert hits == [], "branches on a mode's name; ask the mode object (judging/modes/) instead:\n" + "\n".join(hits)


def test_the_mode_branch_check_catches_each_spelling(tmp_path):
    spellings = [
        'if spec.mode == "pairwise": pass',
        'if col["mode"] in ("score", "pairwise"): pass',
        'if mode in {"score"}: pass',
        'if "pairwise" != judge.get("mode"): pass',
        'if judge_mode not in ["reference"]: pass',
        'if mode.name == "score": pass',
        'match section["mode"]:\n    case "score": pass',
    ]
    code = tmp_path / "code.py"
    code.write_text("\n".join(spellings) + "\nif mode.needs_baseline or modes.get(name) == x: pass\n")
    assert [hit.split(":")[1] for hit in mode_branches(code, tmp_path)] == [str(i) for i in range(1, 8)]
    rules = tmp_path / "rules.smk"
    rules.write_text('rule a:\n    output:\n        "x" if config["judge"]["mode"] == "score" else "y",\n')
    assert [hit.split(":")[1] for hit in mode_branches(rules, tmp_path)] == ["3"]


# The raw config dict is read where it is resolved: config/ (which builds typed specs and settings from
# it), cli.py, and outside the package scripts/ and rules/. Code below takes those typed values.
CONFIG_READERS = {"config", "cli.py"}
CONFIG_NAMES = {"config", "cfg"}
# Stages still handed the raw config: what each reads, and why it has not moved to a typed value.
CONFIG_READS_ALLOWED = {
    "stages/plan.py": "make_plan resolves the config genjudge plan loads (PlanJob.from_config); its helpers read "
    "plan.gpus, plan.load_gb_per_s, gpu_inventory, slurm.gpus_per_node and resources.<step>.cpus, not in PlanJob yet",
    "stages/plan_advice.py": "advice reads the top-level shards and slurm; overlay asks whether the config names "
    "generators:/judges: maps, to write the overlay's keys as the user wrote them",
    "stages/plan_roles.py": "plan_generator/plan_judge read gpus_per_job and shards defaults, resources.<step>, "
    "cache_dir, slurm, the judge's template view and entry keys for errors; not in PlanJob yet",
    "stages/report.py": "run_report reads ReportJob.config: report.*, run, panels, plan.load_gb_per_s, gpu_inventory, "
    "and the per-cell config views summarise takes; ReportJob does not type them yet",
}


def config_reads(path, root=PKG) -> list[str]:
    """Each parameter named `config`/`cfg`, and each `config[...]` or `config.get(...)` read."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
            found += [(node.lineno, f"parameter {p.arg!r}") for p in params if p.arg in CONFIG_NAMES]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in CONFIG_NAMES:
            found.append((node.lineno, f"{node.value.id}[...]"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in CONFIG_NAMES
        ):
            found.append((node.lineno, f"{node.func.value.id}.get(...)"))
    return [f"{path.relative_to(root)}:{line}: {what}" for line, what in sorted(found)]


def test_no_module_below_config_reads_the_raw_config():
    hits, allowed_seen = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in CONFIG_READERS:
            continue
        found = config_reads(path)
        if rel.as_posix() in CONFIG_READS_ALLOWED:
            if found:
                allowed_seen.add(rel.as_posix())
            continue
        hits += found
    assert hits == [], (
        "the raw config is read below config/; resolve it where the job starts (config/ builds typed specs "
        "and settings from it: genjudge.config.specs, .job_settings, .export; scripts/, rules/common.smk and "
        "cli.py call those builders) and pass the typed values down:\n" + "\n".join(hits)
    )
    stale = sorted(set(CONFIG_READS_ALLOWED) - allowed_seen)
    assert stale == [], f"no longer read the raw config: take them off CONFIG_READS_ALLOWED: {stale}"


def test_the_config_read_check_catches_each_spelling(tmp_path):
    code = tmp_path / "code.py"
    code.write_text(
        "def a(config): pass\n"
        "def b(*, cfg=None): pass\n"
        "x = config['run']\n"
        "y = cfg.get('slurm')\n"
        "f = lambda config: 1\n"
        "def ok(model_config, settings): return settings.config, model_config['x'], spec.get('a')\n"
    )
    assert [hit.split(":")[1] for hit in config_reads(code, tmp_path)] == ["1", "2", "3", "4", "5"]


def test_the_docs_list_exactly_the_meta_fields():
    # The tables of this head in the user documentation (docs/architecture.md, and pages of their own).
    listed = set()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text()
        if "| meta field | in | meaning |" not in text:
            continue
        table = text[text.index("| meta field | in | meaning |") :]
        table = table[: table.index("\n\n")] if "\n\n" in table else table
        for row in table.splitlines()[2:]:
            listed |= set(re.findall(r"`([a-z_0-9]+)`", row.split("|")[1]))
    documented = {f.name for f in fields(GenerateMeta)} | {f.name for f in fields(JudgeMeta)}
    assert listed == documented, (sorted(listed - documented), sorted(documented - listed))


def test_the_docs_give_each_wing_the_imports_this_table_allows():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc[doc.index("| wing | may import |") :]
    table = table[: table.index("\n\n")]
    listed = {}
    for row in table.splitlines()[2:]:
        wing, allowed = (re.findall(r"`([a-z_]+)`", cell) for cell in row.split("|")[1:3])
        listed[wing[0]] = set(allowed)
    assert listed == WINGS


def test_defaults_live_only_in_the_schema():
    # No `.get(key, default)` on config sections or specs in the package: the schema fills them.
    hits = []
    for path in PKG.rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(spec|config|judge|generator)(\[\"\w+\"\])?\.get\(\"\w+\", ", line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []


# --- import layers -----------------------------------------------------------------------------
# Every import of a package module by another, at the top or inside a function (a lazy import
# still ties the two together), read from the source.

# What each wing may import besides itself (the package's docstring lists the wings, each wing's
# __init__ says the same in its "May import:" line). `errors` and `cli` are modules at the root.
LOW = {"errors", "models", "cluster", "store", "data", "judging", "planning", "config"}
WINGS = {
    "errors": set(),
    "models": {"errors"},
    "cluster": {"errors", "models"},
    "store": {"errors", "cluster"},
    "data": {"errors", "store"},
    "judging": {"errors", "data"},
    "planning": {"errors", "store", "data", "judging"},
    "config": {"errors", "models", "cluster", "data", "judging"},
    "engine": {"errors", "models", "cluster", "store", "config", "planning"},  # the only importer of torch
    "export": {"errors", "store", "data", "judging", "config"},
    "report_html": LOW - {"config", "models"},
    "stages": LOW | {"engine", "export", "report_html"},
    "demo": LOW | {"engine"},
    "cli": LOW | {"engine", "export", "report_html", "stages", "demo"},
}


def module_name(path, pkg=PKG) -> str:
    parts = ["genjudge", *path.relative_to(pkg).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_names(path) -> set[str]:
    """The names a module binds at its top level: imports, functions, classes, assignments."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def import_graph(pkg=PKG) -> dict[str, dict[str, list[str]]]:
    """{module: {module it imports: ["file:line", ...]}} over the package's own modules."""
    paths = {module_name(p, pkg): p for p in sorted(pkg.rglob("*.py"))}

    def known(name: str) -> str:
        """The module `name` is, or holds `name` (an attribute of it); AssertionError when there is none."""
        found = name
        while found not in paths:  # a name imported from a module, or a module's attribute
            found = found.rsplit(".", 1)[0]
        parent = paths[found]
        rest = name[len(found) + 1 :].split(".")[0]
        if rest and parent.name == "__init__.py":  # `from genjudge.pkg import x`: x must be in pkg's __init__
            assert rest in top_level_names(parent), f"{name}: no such module, nor a name in {found}"
        return found

    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in paths.items():
        edges: dict[str, list[str]] = {}
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "genjudge"]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from its package, up level - 1
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                if base.split(".")[0] == "genjudge":
                    # `from genjudge.x import y`: the module x.y where there is one, else x
                    targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            for target in map(known, targets):
                if target != name:
                    edges.setdefault(target, []).append(f"{path.relative_to(pkg.parent)}:{node.lineno}")
        graph[name] = edges
    return graph


def cycles(graph: dict) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def wing(module: str) -> str:
    return module.split(".")[1] if "." in module else "genjudge"


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": []}, "b": {}}) == []


def test_no_import_cycles_between_modules():
    graph = import_graph()
    assert len(graph) > 50 and "genjudge.engine.judge_parallel" in graph["genjudge.stages.plan"]
    found = []
    for component in cycles(graph):
        found.append([f"{a} -> {b} ({graph[a][b][0]})" for a in component for b in graph[a] if b in component])
    assert found == []


def bench_import_graph(bench=ROOT / "bench") -> dict[str, dict[str, list[str]]]:
    """{bench script: {bench script it imports: ["file:line", ...]}}: the scripts import each other by
    file name, beside one another."""
    names = {p.stem for p in bench.glob("*.py")}
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(bench.glob("*.py")):
        edges: dict[str, list[str]] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            found = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [node.module or ""]
            for target in found:
                if target in names and target != path.stem:
                    edges.setdefault(target, []).append(f"bench/{path.name}:{node.lineno}")
        graph[path.stem] = edges
    return graph


def test_no_import_cycles_between_bench_scripts(tmp_path):
    graph = bench_import_graph()
    assert "gpu_bench" in graph["gpu_check"]  # the check runs the generation bench
    assert cycles(graph) == []
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    assert cycles(bench_import_graph(tmp_path)) == [["a", "b"]]  # an import inside a function counts too


def test_the_package_root_holds_wings_and_each_says_what_it_may_import():
    root = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert root == set(WINGS) | {"__init__"}
    listed = re.findall(r"^    (\w+) {2,}", (PKG / "__init__.py").read_text().split('"""')[1], re.M)
    assert listed == list(WINGS), "the package docstring lists the wings in the order of the table"
    for name, allowed in WINGS.items():
        init = PKG / name / "__init__.py"
        if not init.exists():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        line = re.search(r"May import: ([^.(]*)", doc)
        assert line, f"{init.relative_to(ROOT)}: no 'May import:' line"
        assert set(re.split(r",\s*", line.group(1).strip())) == allowed, f"{name}: the docstring and WINGS differ"


def layer_violations(graph: dict) -> list[str]:
    wrong = []
    for module, edges in graph.items():
        for target, where in edges.items():
            a, b = wing(module), wing(target)
            if a != b and b not in WINGS.get(a, set()) and b != "genjudge":
                wrong.append(f"{module} ({a}) imports {target} ({b}) at {where[0]}")
    return wrong


def test_each_wing_imports_only_what_the_table_allows():
    graph = import_graph()
    assert {wing(m) for m in graph} == set(WINGS) | {"genjudge"}
    assert layer_violations(graph) == []


def test_the_checks_catch_an_upward_import_and_a_circle(tmp_path):
    # A copy of the package with a lazy import of the engine from data, and of data from store's atomic
    # writes (store -> data -> store).
    import shutil

    copy = tmp_path / "genjudge"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    at = {}
    for rel, line in (
        ("data/sharding.py", "from genjudge.engine import devices"),
        ("store/atomic.py", "from genjudge.data import shard_files"),
    ):
        path = copy / rel
        at[rel] = len(path.read_text().splitlines()) + 4
        with open(path, "a") as fh:
            fh.write(f"\n\ndef _late():\n    {line}  # noqa: F401\n")
    graph = import_graph(copy)
    with open(copy / "stages" / "report_table.py", "a") as fh:  # a module that moved away: no such module
        fh.write("\n\ndef _gone():\n    from genjudge.failures import surviving  # noqa: F401\n")
    with pytest.raises(AssertionError, match="genjudge.failures: no such module"):
        import_graph(copy)
    assert layer_violations(graph) == [
        "genjudge.data.sharding (data) imports genjudge.engine.devices (engine) at "
        f"genjudge/data/sharding.py:{at['data/sharding.py']}",
        "genjudge.store.atomic (store) imports genjudge.data.shard_files (data) at "
        f"genjudge/store/atomic.py:{at['store/atomic.py']}",
    ]
    assert ["genjudge.data.shard_files", "genjudge.store.atomic"] in cycles(graph)
