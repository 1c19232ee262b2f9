"""SLURM settings without a cluster: per-role options, arrays and requeue, and bad input while planning."""

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zlib

import pytest
from conftest import clean_env

from genjudge import config as wfconfig
from genjudge.cluster import job_resources
from genjudge.cluster.job_resources import JobSettings, SlurmSettings, StepResources
from genjudge.cluster.slurm_array_task import own_command_line
from genjudge.cluster.slurm_job import job_info
from genjudge.cluster.slurm_submission import decide
from genjudge.config.job_settings import slurm_from_config


@pytest.fixture(scope="module")
def no_slurm_path(tmp_path_factory):
    """A PATH with the tools a machine without SLURM has: no sinfo, squeue, sacct or scontrol (where
    they are installed but cannot reach a cluster, the SLURM plugin's import waits on them)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for tool in ("which", "sh", "bash", "git", "env"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    return os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable)])


def preview(workflow, *config, path, env=None):
    return subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "plan", "--slurm", "--config", *config],
        cwd=workflow.path,
        env=clean_env(PATH=path, **(env or {})),  # no cluster: no default partition
        capture_output=True,
        text=True,
    )


def lines_of(out: str) -> dict:
    return {line.split(" ", 1)[0]: line for line in out.splitlines() if not line.startswith(" ")}


@pytest.mark.workflow
def test_each_role_gets_its_own_sbatch_options(workflow, no_slurm_path):
    roles = {
        "partition": "shared",
        "account": "proj",
        "requeue": True,
        "generate": {"partition": "gpu-small", "gpu_model": "l4"},
        "judge": {"partition": "gpu-large", "qos": "long", "constraint": "a100_80g", "gpus_per_node": 8},
    }
    proc = preview(workflow, "shards=24", f"slurm={json.dumps(roles)}", path=no_slurm_path)
    assert proc.returncode == 0, proc.stderr
    lines = lines_of(proc.stdout)
    gen, judge = lines["generate"], lines["judge"]
    assert "-p gpu-small" in gen and "-A proj" in gen and "--gpus=l4:1" in gen and "--requeue" in gen
    assert "--qos" not in gen and "-C" not in gen
    assert "-p gpu-large" in judge and "-A proj" in judge and "--qos=long" in judge and "-C a100_80g" in judge
    assert "--gpus=8" in judge and "--nodes=1" in judge and "--requeue" in judge
    assert "job arrays: 24 generation jobs in arrays of up to 1000 tasks" in proc.stdout
    assert "jobs: >= 24" in proc.stdout

    # Environment variables: the role's own first, then the shared one; config wins over both.
    env = {"GENJUDGE_SLURM_PARTITION": "envshared", "GENJUDGE_SLURM_JUDGE_PARTITION": "envjudge"}
    lines = lines_of(preview(workflow, "shards=2", path=no_slurm_path, env=env).stdout)
    assert "-p envshared" in lines["generate"] and "-p envjudge" in lines["judge"]
    lines = lines_of(
        preview(workflow, "shards=2", 'slurm={"generate": {"partition": "cfg"}}', path=no_slurm_path, env=env).stdout
    )
    assert "-p cfg" in lines["generate"] and "-p envjudge" in lines["judge"]

    off = preview(workflow, "shards=24", 'slurm={"arrays": false}', path=no_slurm_path)
    assert "job arrays: off (slurm.arrays: false)" in off.stdout and "--requeue" not in off.stdout


BAD = [
    ({"generator": {"partition": "x"}}, "slurm: Additional properties are not allowed ('generator' was unexpected)"),
    ({"array_limit": 0}, "slurm.array_limit: 0 is less than the minimum of 1"),
    ({"judge": {"gpus_per_node": 0}}, "slurm.judge.gpus_per_node: 0 is less than the minimum of 1"),
    ({"generate": {"gpus_per_node": 1}}, "gpus_per_job = 2 is more than slurm.generate.gpus_per_node = 1"),
]


@pytest.mark.workflow
def test_bad_slurm_settings_stop_planning_with_the_key_named(workflow):
    for slurm, message in BAD:
        cfg = workflow.write_config("bad.yaml", slurm=slurm, gpus_per_job=2)
        proc = workflow.run("-n", "--configfile", cfg, check=False)
        assert proc.returncode != 0
        assert message in proc.stdout + proc.stderr, (slurm, proc.stderr[-2000:])
        assert not (workflow.path / "results").exists()


def test_arrays_are_the_default_and_step_aside_where_they_would_stall():
    config = slurm_from_config(wfconfig.defaults())
    sub = decide(config, 24, 100)
    assert sub.array_jobs == "generate" and sub.array_limit == 1000 and not sub.requeue
    # Fewer job slots than generation jobs: the plugin would hold back array tasks for good.
    sub = decide(config, 2000, 100)
    assert sub.array_jobs is None and "--jobs 2000" in sub.notes[0]
    assert decide(config, 1, 100).array_jobs is None
    assert decide(config, 24, 100, gpu_counts={1, 2}).array_jobs is None  # one array, one resource request
    assert decide(config, 24, None, given_arrays="generate,judge").array_jobs == "generate,judge"
    assert decide(config, 24, 100, given_limit=8).array_limit == 8
    one = slurm_from_config(wfconfig.defaults(slurm={"array_limit": 1, "requeue": True}))
    sub = decide(one, 24, 100)
    assert sub.array_jobs is None and sub.requeue


def plugin_payload(commands: dict) -> str:
    """The array payload as snakemake-executor-plugin-slurm 2.8 builds it: task -> zlib'd command, hex, JSON, base64."""
    execs = {str(i): zlib.compress(c.encode(), level=9).hex() for i, c in commands.items()}
    return base64.b64encode(json.dumps(execs).encode()).decode()


def test_an_array_task_is_pointed_at_its_own_job():
    def cmd(shard):
        return (
            f"python -m snakemake --target-jobs 'generate:generator=g,dataset=d,shard={shard}' --allowed-rules generate"
        )

    payload = plugin_payload({2: cmd(7), 3: cmd(9)})
    argv = [*shlex.split(cmd(3)), "--executor", "slurm-jobstep", f"--slurm-jobstep-array-execs={payload}"]
    fixed = own_command_line(argv, {"SLURM_ARRAY_TASK_ID": "3"})
    assert fixed[fixed.index("--target-jobs") + 1] == "generate:generator=g,dataset=d,shard=9"
    assert fixed[fixed.index("--target-jobs") + 2 :] == argv[argv.index("--target-jobs") + 2 :]
    assert own_command_line(fixed, {"SLURM_ARRAY_TASK_ID": "3"}) is None  # restarted once, not again
    assert own_command_line(argv, {"SLURM_ARRAY_TASK_ID": "1"}) is None  # the first task runs its own
    assert own_command_line(argv, {}) is None  # not an array task
    assert own_command_line(shlex.split(cmd(3)), {"SLURM_ARRAY_TASK_ID": "3"}) is None  # not an array command


def test_job_meta_records_partition_array_task_and_restarts():
    env = {
        "SLURM_JOB_ID": "41",
        "SLURM_JOB_PARTITION": "small",
        "SLURM_ARRAY_JOB_ID": "40",
        "SLURM_ARRAY_TASK_ID": "2",
        "SLURM_RESTART_COUNT": "1",
    }
    assert job_info(env) == {"slurm_partition": "small", "slurm_array": "40_2", "slurm_restarts": 1}
    assert job_info({}) == {"slurm_partition": None, "slurm_array": None, "slurm_restarts": 0}


@pytest.mark.workflow
def test_the_demos_dry_runs_say_what_will_run_and_nothing_else(workflow, no_slurm_path):
    env = clean_env(PATH=no_slurm_path)
    slurm = workflow.run("-n", "--profile", "profiles/slurm", env=env)
    text = slurm.stdout + slurm.stderr
    assert text.count("rule generate:") == 4 and "gpu=1, cpus_per_gpu=4" in text
    assert "Shell command" not in text  # every rule but demo_model runs a script
    assert not re.search(r"^\s+threads: ", text, re.M)  # SLURM books a GPU job's CPUs with --cpus-per-gpu
    # The committed demo models are no job: no warning that Snakemake has no record of how they were made.
    assert "missing provenance" not in text and "demo_model" not in text
    local = workflow.run("-n", env=env)
    text = local.stdout + local.stderr
    assert "rule report:" in text and "missing provenance" not in text and "Shell command" not in text


def test_a_gpu_job_on_slurm_takes_its_cpus_from_what_sbatch_booked():
    from types import SimpleNamespace

    cfg = JobSettings({"generate": StepResources(mem_mb=1, runtime=1, cpus=3, cpus_per_gpu=4)}, SlurmSettings())
    assert job_resources.threads(cfg, "generate", 2) == 8 and job_resources.threads(cfg, "generate", 0) == 3
    # Snakemake would cap threads at the submitting host's cores: on SLURM a GPU job declares 1 ...
    assert job_resources.threads(cfg, "generate", 2, slurm=True) == 1
    assert job_resources.threads(cfg, "generate", 0, slurm=True) == 3
    # ... and uses the CPUs booked with it (--cpus-per-gpu x --gpus).
    booked = SimpleNamespace(gpu=2, cpus_per_gpu=4)
    assert job_resources.job_threads(1, booked, slurm=True) == 8
    assert job_resources.job_threads(6, booked, slurm=False) == 6
    assert job_resources.job_threads(3, SimpleNamespace(gpu=0, cpus_per_gpu=4), slurm=True) == 3
