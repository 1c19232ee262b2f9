"""bench/gpu_check.py's reports when a part fails: the reason is shown and the failed run kept."""

import shutil
import sys
import tempfile

import pytest
from judges import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402 - beside the benches


def test_pytest_that_cannot_start_shows_why():
    # -S: no site-packages, so no pytest: it says so on stderr only
    res = gpu_check.run_pytest_gpu([sys.executable, "-S"])
    assert res["returncode"] != 0 and "No module named pytest" in res["summary"]


@pytest.mark.workflow
def test_a_failed_workflow_run_keeps_its_directory_and_says_where(tmp_path, monkeypatch):
    model = tmp_path / "login-model"  # config.json only: the plan works, the run cannot load it
    model.mkdir()
    shutil.copy(ROOT / "models" / "demo-generator" / "config.json", model)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit, match="the workflow run failed") as failed:
        gpu_check.bench_workflow(str(model), 2, 2, gpu=False)
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("gpu-check-")]
    assert len(kept) == 1 and str(kept[0]) in str(failed.value)
    assert (kept[0] / "check.yaml").is_file()
