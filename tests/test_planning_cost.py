"""What planning costs per job, counted rather than timed (timings drift with the machine's load).

Snakemake calls the rules' input, params and resource functions once per job while it plans, so what
the workflow does in them is paid once per shard: at 10,000 shards a file read or a config lookup per
job is 10,000 of them. The config is resolved, the checks run, the digests are computed and the
failure records read a fixed number of times per invocation, and Snakemake computes the rules'
functions' signatures once (genjudge.config.rule_params.remember_signatures): a dry run of 1 shard and
1 judge job and one of 100 shards and 20 judge jobs make the same calls into the package, function by
function, and to `inspect.signature` (cProfile on the real command line)."""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import clean_env, copy_workflow, snakemake

from genjudge.config.rule_params import rerun_settings


def package_calls(wd, shards: int, judge_shards: int) -> dict[str, int]:
    """Calls of each function of the genjudge package, and of `inspect.signature` (Snakemake inspects
    the rules' functions with it), in one `snakemake -n` of `shards` shards and `judge_shards` judge jobs."""
    prof = wd / f"{shards}.prof"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "snakemake", "-n", "--quiet", "all"]
    cmd += ["--config", f"shards={shards}", "dataset={'path': 'items.jsonl'}", "gpu_inventory=[]"]
    cmd += [f"judge={{'shards': {judge_shards}}}"]
    proc = subprocess.run(cmd, cwd=wd, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = pstats.Stats(str(prof)).stats  # (file, line, function) -> (primitive calls, calls, ...)
    return {
        f"{path.split('/genjudge/', 1)[-1]}:{line} {name}": calls
        for (path, line, name), (_, calls, *_) in stats.items()
        if "/genjudge/" in path or (path.endswith("inspect.py") and name == "signature")
    }


@pytest.mark.workflow
def test_planning_calls_the_package_as_often_at_100_shards_and_20_judge_jobs_as_at_1(tmp_path):
    copy_workflow(tmp_path)
    items = [{"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(100)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    one, hundred = package_calls(tmp_path, 1, 1), package_calls(tmp_path, 100, 20)
    # what the counts cover: the config resolved, the datasets checked, the models' digests, the failure records
    for what in ("experiment.py:", "checks.py:", "modelref.py:", "failures.py:"):
        assert any(what in f for f in one), f"no call into {what} counted"
    grew = {f: (one.get(f, 0), n) for f, n in hundred.items() if n != one.get(f, 0)}
    assert not grew, f"called per job (calls at 1 shard, at 100): {grew}"


@pytest.mark.workflow
def test_a_local_dry_run_runs_no_slurm_tool_beyond_what_the_plugins_import_runs(tmp_path):
    """Snakemake imports the SLURM plugin in every command, and the plugin runs SLURM's tools as it is
    imported (docs/slurm.md): a local dry run runs those and no other, so it waits on no controller
    beyond what Snakemake's own start-up waits for. The tools here record their calls and fail."""
    tools, log = tmp_path / "bin", tmp_path / "calls.log"
    tools.mkdir()
    for tool in ("sinfo", "scontrol", "squeue", "sacct", "sbatch", "srun", "scancel"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexit 1\n')
        (tools / tool).chmod(0o755)
    env = clean_env(PATH=f"{tools}:{os.environ['PATH']}")
    subprocess.run([sys.executable, "-c", "import snakemake_executor_plugin_slurm"], env=env, check=True)
    plugin = log.read_text().splitlines()
    log.unlink()
    (tmp_path / "wf").mkdir()
    copy_workflow(tmp_path / "wf")
    snakemake(tmp_path / "wf", "-n", "--config", "shards=2", env=env)
    assert "scontrol show config" in plugin, plugin
    assert log.read_text().splitlines() == plugin


def settings_of(failed=None, **temperatures):
    keys = ["model", "temperature", "system_prompt", "failed_attempts"]

    def params(cell):
        prompt = "Answer {question}" if cell.generator == "b" else "Answer"
        return {"model": "m", "temperature": temperatures[cell.generator], "system_prompt": prompt}

    cells = [{"generator": g} for g in temperatures]
    return rerun_settings(params, keys, cells, name="generate", failed=failed or {}, job_id=lambda w: w.generator)


def test_a_setting_the_same_for_every_job_is_a_plain_param():
    one = settings_of(a=0.5)
    assert one == {"model": "model=m", "temperature": "temperature=0.5", "system_prompt": "system_prompt=Answer"} | {
        "failed_attempts": None
    }
    two = settings_of(a=0.5, c=0.7)
    assert two["model"] == "model=m"
    assert two["temperature"](SimpleNamespace(generator="c")) == "temperature=0.7"


def test_a_setting_snakemake_would_fill_in_and_a_recorded_failure_stay_functions_of_the_job():
    s = settings_of(failed={"b": 2}, a=0.5, b=0.5)
    assert s["temperature"] == "temperature=0.5"
    assert callable(s["system_prompt"])  # a plain "{question}" would be taken for a wildcard
    assert s["system_prompt"](SimpleNamespace(generator="b")) == "system_prompt=Answer {question}"
    assert s["failed_attempts"](SimpleNamespace(generator="b")) == "failed_attempts=2"
    assert s["failed_attempts"](SimpleNamespace(generator="a")) is None


def test_a_setting_no_param_carries_stops_the_plan():
    from snakemake.exceptions import WorkflowError

    with pytest.raises(WorkflowError, match=r"settings \['top_k'\] are not among their rerun params"):
        rerun_settings(lambda c: {"top_k": 5}, ["model"], [{"g": "a"}], name="generate", failed={}, job_id=str)
