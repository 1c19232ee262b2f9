"""Jobs that need no model start without torch or transformers: a Snakemake job is a Python process of
its own, and importing them costs it seconds of CPU (more than the work of a split or a merge)."""

import ast
import subprocess
import sys

import pytest
from judges import ROOT

SCRIPTS = ROOT / "scripts"
HEAVY = ("torch", "transformers", "accelerate", "bitsandbytes", "vllm")
# The jobs that load a model, and the plan, which builds each model's shapes on torch's meta device
# (accelerate's device map) and asks torch which GPUs it sees: they import torch by design.
MODEL_JOBS = {"generate", "judge", "plan"}
MODEL_FREE = {"split", "merge", "merge_judge", "parse_verdicts", "report"}
OPTIONAL = {"export"}  # model-free too, and not among the demo's jobs (report.export: [] by default)


def script_imports(path) -> list[str]:
    """Every module the script imports, at its top and inside its functions."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return sorted(set(names))


def test_every_script_is_either_a_model_job_or_model_free():
    assert {p.stem for p in SCRIPTS.glob("*.py")} == MODEL_JOBS | MODEL_FREE | OPTIONAL


@pytest.mark.parametrize("script", sorted(MODEL_FREE | OPTIONAL))
def test_a_model_free_script_imports_no_torch(script):
    imports = script_imports(SCRIPTS / f"{script}.py")
    assert any(m.startswith("genjudge.stages") for m in imports), imports
    code = (
        "import importlib, sys\n"
        f"for name in {imports!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]", f"scripts/{script}.py imports {proc.stdout.strip()}"
