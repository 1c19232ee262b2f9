"""Every bench/*.py runs in its quick mode: a change of the package that breaks a bench fails here,
not months later when someone wants its figures.

The contract of a bench script: `python bench/NAME.py --quick` runs every measure at tiny sizes in
seconds, exits 0, and writes no results file (the committed figures under bench/ stay as measured).
A new bench is picked up by its file name."""

import ast
import hashlib
import subprocess
import sys

import pytest
from conftest import clean_env
from judges import ROOT

# _x.py: shared code. endpoint_bench needs a model server: tests/test_endpoints.py runs its quick mode
# against that module's server rather than starting one more here; rubric_bench starts two vLLM engines:
# tests/test_vllm_engine.py (marked vllm, out of make test-fast) runs its quick mode.
ELSEWHERE = {"endpoint_bench.py", "rubric_bench.py"}
BENCHES = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_") and p.name not in ELSEWHERE)
pytestmark = pytest.mark.bench


def runs_snakemake(path) -> bool:
    """Whether a script starts snakemake (the string "snakemake" as a command's word): its quick run
    is a workflow test (`make test-fast` leaves those out)."""
    return any(isinstance(n, ast.Constant) and n.value == "snakemake" for n in ast.walk(ast.parse(path.read_text())))


def bench_param(path):
    return pytest.param(path, id=path.stem, marks=[pytest.mark.workflow] if runs_snakemake(path) else [])


def tracked_bench_files() -> dict[str, str]:
    """The committed files under bench/ (figures, notes, scripts) and their digests."""
    names = subprocess.run(
        ["git", "ls-files", "bench"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {n: hashlib.sha256((ROOT / n).read_bytes()).hexdigest() for n in names if (ROOT / n).exists()}


def test_the_benches_are_found():
    assert {"run_bench.py", "scale_bench.py", "store_bench.py", "gpu_bench.py"} <= {p.name for p in BENCHES}
    assert {p.name for p in BENCHES if runs_snakemake(p)} == {"run_bench.py", "scale_bench.py", "gpu_check.py"}


@pytest.mark.parametrize("bench", [bench_param(p) for p in BENCHES])
def test_bench_runs_in_quick_mode(bench, tmp_path):
    before = tracked_bench_files()
    env = clean_env(PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, str(bench), "--quick"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{bench.name} --quick failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert proc.stdout.strip(), f"{bench.name} --quick printed no figures"
    assert tracked_bench_files() == before, f"{bench.name} --quick rewrote committed files under bench/"
    assert list(tmp_path.iterdir()) == [], f"{bench.name} --quick left files in its working directory"
    if bench.name == "gpu_bench.py" and "GPU: cpu" in proc.stdout:
        assert "torch sees no CUDA GPU here: the GPU measurements are skipped" in proc.stdout


def test_make_gpu_check_without_cuda_says_so_in_one_line_and_exits_2(tmp_path):
    env = clean_env(PYTHONPATH=str(ROOT / "src"))
    direct = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert direct.returncode == 2
    lines = (direct.stdout + direct.stderr).strip().splitlines()
    assert len(lines) == 1 and "sees no CUDA GPU on this machine" in lines[0], lines
    via_make = subprocess.run(["make", "-s", "gpu-check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert via_make.returncode == 2 and lines[0] in via_make.stdout
    assert list(tmp_path.iterdir()) == []
