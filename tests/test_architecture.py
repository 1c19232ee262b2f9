"""Rules of the package layout that matter at run time, checked rather than stated."""

import ast
import re
import subprocess
import sys
from dataclasses import fields

from judges import ROOT

from genjudge.records import GenerateMeta, JudgeMeta

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


def test_no_branching_on_the_mode_name_outside_the_mode_objects():
    hits = []
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "rules").glob("*.smk")]:
        if "modes" in path.relative_to(ROOT).parts:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"mode ?==", line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []


def test_readme_lists_exactly_the_meta_fields():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| meta field | in | meaning |") :]
    table = table[: table.index("\n\n")]
    listed = set()
    for row in table.splitlines()[2:]:
        listed |= set(re.findall(r"`([a-z_0-9]+)`", row.split("|")[1]))
    documented = {f.name for f in fields(GenerateMeta)} | {f.name for f in fields(JudgeMeta)}
    assert listed == documented, (sorted(listed - documented), sorted(documented - listed))


def test_defaults_live_only_in_the_schema():
    # No `.get(key, default)` on config sections or specs in the package: the schema fills them.
    hits = []
    for path in PKG.rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(spec|config|judge|generator)(\[\"\w+\"\])?\.get\(\"\w+\", ", line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []
