"""Local multi-GPU runs: `snakemake --resources gpu=N` with a configured inventory."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import Workflow, clean_env, new_workflow

pytestmark = pytest.mark.workflow


def overlapping_sharers(metas):
    """Pairs of jobs that held a common device during overlapping time."""
    bad = []
    for i, a in enumerate(metas):
        for b in metas[i + 1 :]:
            overlap = a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]
            if overlap and set(a["gpus"]) & set(b["gpus"]):
                bad.append((a["label"], b["label"], sorted(set(a["gpus"]) & set(b["gpus"]))))
    return bad


def all_metas(workflow, run="demo"):
    metas = []
    for m in workflow.metas(run):
        metas.append({**m, "label": f"{workflow.path.name}/{run}/shard{m['shard']}"})
    judge = json.loads((workflow.results(run) / "judge" / "demo-judge" / "raw.meta.json").read_text())
    metas.append({**judge, "label": f"{workflow.path.name}/{run}/judge"})
    return metas


# Runs stop at the judge's merged verdicts: the leases are the generation and judge jobs'.
JUDGED = "results/demo/judge/demo-judge/raw.parquet"
FAST = {
    "generator": {"max_new_tokens": 8},
    "judge": {"max_new_tokens": 4},
    "resources": {"generate": {"cpus_per_gpu": 1}, "judge": {"cpus_per_gpu": 1}},
}


@pytest.fixture(scope="module")
def together(tmp_path_factory, built_models):
    """Two workflows started together on one machine's three GPUs (one lock directory): `six`, six
    shards, and `other`, a copy of it with three, each with `--resources gpu=3`."""
    six = new_workflow(tmp_path_factory.mktemp("together"), built_models)
    other = Workflow(six.path.parent / "other", six.lock_dir)
    shutil.copytree(six.path, other.path)
    cfgs = [
        w.write_config(shards=n, gpu_inventory=[0, 1, 2], lock_dir=str(six.lock_dir), **FAST)
        for w, n in ((six, 6), (other, 3))
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "snakemake", JUDGED, "--cores", "3", "--resources", "gpu=3", "--configfile", str(c)],
            cwd=w.path,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w, c in zip((six, other), cfgs)
    ]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    return six, other, [p.returncode for p in procs], outs


def test_six_shards_on_three_gpus_never_share_a_device(together):
    workflow, _, returncodes, outs = together
    assert returncodes[0] == 0, outs[0][-3000:]
    metas = all_metas(workflow)
    shards = [m for m in metas if "shard" in m["label"]]
    assert len(shards) == 6
    for m in shards:
        assert m["gpu_source"] == "lease"
        assert len(m["gpus"]) == 1 and m["cuda_visible_devices"] == m["gpus"][0]
    assert len({m["gpus"][0] for m in shards}) > 1, "jobs did not spread over the GPUs"
    judge = metas[-1]
    assert judge["cuda_visible_devices"] == "0,1,2"
    assert overlapping_sharers(metas) == []


@pytest.fixture(scope="module")
def in_allocation(tmp_path_factory, built_models):
    """snakemake started within salloc/sbatch, which sets SLURM_JOB_ID and limits CUDA_VISIBLE_DEVICES
    (here to 2,3 of a configured 0-3), the jobs run locally: three shards on the two GPUs, with
    `--resources gpu=4`."""
    workflow = new_workflow(tmp_path_factory.mktemp("in_allocation"), built_models)
    cfg = workflow.write_config(shards=3, gpu_inventory=[0, 1, 2, 3], **FAST)
    env = clean_env(CUDA_VISIBLE_DEVICES="2,3", SLURM_JOB_ID="4242", GENJUDGE_LOCK_DIR=str(workflow.lock_dir))
    workflow.run(JUDGED, "--cores", "4", "--resources", "gpu=4", "--configfile", cfg, env=env)
    return workflow


def test_inside_a_slurm_allocation_the_local_executor_still_leases(in_allocation):
    # snakemake started within salloc/sbatch: SLURM_JOB_ID is set, but the jobs run locally.
    metas = all_metas(in_allocation)
    for m in metas[:-1]:
        assert m["gpu_source"] == "lease" and len(m["gpus"]) == 1 and m["cuda_visible_devices"] in ("2", "3")
    assert overlapping_sharers(metas) == []


def test_outer_cuda_visible_devices_limits_the_inventory(in_allocation):
    metas = all_metas(in_allocation)
    for m in metas[:-1]:
        assert m["cuda_visible_devices"] in ("2", "3")
    assert metas[-1]["cuda_visible_devices"] == "2,3"
    assert overlapping_sharers(metas) == []


def test_two_workflows_started_together_never_share_a_device(together):
    workflow, other, returncodes, outs = together
    assert returncodes == [0, 0], outs[0][-3000:] + outs[1][-3000:]
    metas = all_metas(workflow) + all_metas(other)
    assert overlapping_sharers(metas) == []
    # Each run's judge leased all three GPUs, so the two judges ran one after the other.
    judges = [m for m in metas if m["label"].endswith("judge")]
    assert [j["cuda_visible_devices"] for j in judges] == ["0,1,2", "0,1,2"]
