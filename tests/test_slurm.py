"""`snakemake --profile slurm` against a real, throwaway single-node SLURM cluster."""

import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXTERNAL_CPU, clean_env, new_workflow, planned_jobs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "slurm"))
from cluster import Cluster, unavailable_reason  # noqa: E402

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

# Without slurmdbd there is no sacct; poll quickly so the tests do not idle.
FAST_POLL = [
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--seconds-between-status-checks",
    "1",
    "--slurm-no-account",
]
SMALL = {
    "generator": {"max_new_tokens": 8},
    "judge": {"max_new_tokens": 4},
    "resources": {
        "generate": {"cpus_per_gpu": 1, "mem_mb": 1000, "runtime": 10},
        "judge": {"cpus_per_gpu": 1, "mem_mb": 2000, "runtime": 10},
    },
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"SLURM test cluster cannot run in CI: {reason}")
        pytest.skip(reason)
    c = Cluster(tmp_path_factory.mktemp("slurm"), gpus=4)
    EXTERNAL_CPU.append(c.reaped_cpu)  # the CPU log counts the jobs SLURM ran, as the module's
    try:
        c.start()  # raises (fails the tests) when the cluster cannot start
        yield c
    finally:
        try:
            c.stop()
        finally:
            EXTERNAL_CPU.remove(c.reaped_cpu)


def slurm_env(cluster, **extra):
    return clean_env(**cluster.env, **extra)


def jobs_of(cluster, since_id=0):
    """Submitted jobs: id, rule, wildcards, time limit (min), memory (MB), state, start and end."""
    out = cluster.run("scontrol", "show", "job", "-o", check=False).stdout
    jobs = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if not fields.get("JobId") or int(fields["JobId"]) <= since_id:
            continue
        comment = fields.get("Comment", "")
        rule = re.search(r"rule_(\w+?)(_wildcards|$)", comment)
        jobs.append(
            {
                "id": int(fields["JobId"]),
                "rule": rule.group(1) if rule else comment,
                "comment": comment,
                "time_limit": fields.get("TimeLimit"),
                "mem": fields.get("MinMemoryNode"),
                "state": fields.get("JobState"),
                "gpus": fields.get("TresPerJob", ""),
                "array_job": fields.get("ArrayJobId"),
                "array_task": fields.get("ArrayTaskId"),
                "partition": fields.get("Partition"),
                "restarts": int(fields.get("Restarts") or 0),
                "requeue": fields.get("Requeue"),
                "reason": fields.get("Reason"),
                "start": fields.get("StartTime"),
                "end": fields.get("EndTime"),
            }
        )
    return sorted(jobs, key=lambda j: j["id"])


def sbatch_options(call: str) -> set:
    """The options of an sbatch line that say what a job asks for (not its name, log or command)."""
    call = call.split(" --wrap", 1)[0]
    call = re.sub(r"\s--(parsable|export=ALL)\b|\s--(job-name|output|comment)\s+('[^']*'|\S+)|\s-D\s+\S+", "", call)
    tokens = call.split()[1:]
    out, i = set(), 0
    while i < len(tokens):  # "-t 30" and "--mem 4000" are one option each, "--gpus=1" too
        if "=" not in tokens[i] and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            out.add(f"{tokens[i]} {tokens[i + 1]}")
            i += 2
        else:
            out.add(tokens[i])
            i += 1
    return out


def sbatch_preview(workflow, cfg, cluster) -> str:
    """What `genjudge plan --slurm` says the plugin will submit for this config."""
    return subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "plan", "--slurm", "--configfile", str(cfg)],
        cwd=workflow.path,
        env=slurm_env(cluster),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def preview_options(preview: str) -> dict:
    """`genjudge plan --slurm`: rule -> the sbatch options it promises (lines after them are notes)."""
    return {
        line.split(" ", 1)[0]: sbatch_options(line.split(": ", 1)[1])
        for line in preview.splitlines()
        if not line.startswith(" ")
    }


def last_job_id(cluster):
    ids = [j["id"] for j in jobs_of(cluster)]
    return max(ids) if ids else 0


def test_demo_through_profile_slurm_matches_a_local_run(cluster, workflow):
    # slurm.arrays: false, the documented switch: one sbatch per shard, each as the preview says.
    cfg = workflow.write_config("slurm.yaml", run="onslurm", shards=2, slurm={"arrays": False}, **SMALL)
    since = last_job_id(cluster)
    proc = workflow.run(
        "--profile", "slurm", *FAST_POLL, "--verbose", "--configfile", cfg, env=slurm_env(cluster), timeout=900
    )
    # What the preview promised is what the plugin submitted, option for option.
    promised = preview_options(sbatch_preview(workflow, cfg, cluster))
    submitted = {}
    calls = re.findall(r"sbatch call: (.+)", proc.stdout + proc.stderr)
    assert len(calls) == 3 and not any("--array" in c for c in calls)
    for call in calls:
        rule = re.search(r"--comment '?rule_(\w+?)(_wildcards|'|\s)", call).group(1)
        submitted.setdefault(rule, set()).add(frozenset(sbatch_options(call)))
    assert set(submitted) == {"generate", "judge"}
    for rule, calls in submitted.items():
        assert calls == {frozenset(promised[rule])}, (rule, calls, promised[rule])
    metas = workflow.metas("onslurm")
    assert len(metas) == 2
    for m in metas:
        assert m["gpu_source"] == "slurm" and m["slurm_job_id"]
        assert re.fullmatch(r"[0-3]", m["cuda_visible_devices"]), m["cuda_visible_devices"]
    judge = json.loads((workflow.results("onslurm") / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge["gpu_source"] == "slurm" and judge["cuda_visible_devices"] == "0,1,2,3"
    submitted = jobs_of(cluster, since)
    assert sorted(j["rule"] for j in submitted) == ["generate"] * 2 + ["judge"]
    assert [j["gpus"] for j in submitted if j["rule"] == "generate"] == ["gres:gpu:1"] * 2
    assert [j["gpus"] for j in submitted if j["rule"] == "judge"] == ["gres:gpu:4"]

    local = workflow.write_config("local.yaml", run="onlocal", shards=2, cache_dir="results/.local-cache", **SMALL)
    workflow.run("--cores", "2", "--configfile", local)
    a, b = workflow.results("onslurm"), workflow.results("onlocal")
    assert (a / "judgments" / "demo-judge.parquet").read_bytes() == (
        b / "judgments" / "demo-judge.parquet"
    ).read_bytes()
    sa, sb = (json.loads((r / "report" / "summary.json").read_text()) for r in (a, b))
    # The SLURM jobs were leased placeholder GPU ids on a machine without CUDA, and the report says so;
    # the local run leased none.
    assert sb["placement_warnings"] == []
    assert sorted(w.split(":")[0] for w in sa["placement_warnings"]) == ["judge", "shard 0", "shard 1"]
    assert all("but ran on the CPU: torch saw no CUDA device" in w for w in sa["placement_warnings"])
    volatile = {"run", "shards", "judge", "generator", "time_model", "placement_warnings"}  # time_model: seconds
    assert {k: v for k, v in sa.items() if k not in volatile} == {k: v for k, v in sb.items() if k not in volatile}


def dry_run_jobs(text: str) -> dict:
    """`snakemake -n`'s jobs: rule -> sorted list of what each asks for (gpu, mem_mb, runtime, ...)."""
    jobs: dict = {}
    for block in re.split(r"\n(?=rule \w+:)", text):
        m = re.match(r"rule (\w+):", block)
        res = re.search(r"^\s+resources: (.*)$", block, re.M)
        if not m or not res:
            continue
        values = dict(kv.split("=", 1) for kv in res.group(1).split(", "))
        if "gpu" in values:  # the model jobs
            asked = {k: values[k] for k in ("gpu", "mem_mb", "runtime", "cpus_per_gpu", "nodes") if k in values}
            jobs.setdefault(m.group(1), []).append(asked)
    return {rule: sorted(v, key=str) for rule, v in jobs.items()}


def submitted_jobs(calls: list[str]) -> dict:
    """The same, from the sbatch calls the SLURM plugin made."""
    jobs: dict = {}
    for call in calls:
        rule = re.search(r"--comment '?rule_(\w+?)(_wildcards|'|\s)", call).group(1)
        opts = sbatch_options(call)
        asked = {}
        for o in opts:
            for flag, key in (
                ("--gpus=", "gpu"),
                ("--mem ", "mem_mb"),
                ("-t ", "runtime"),
                ("--cpus-per-gpu=", "cpus_per_gpu"),
                ("--nodes=", "nodes"),
            ):
                if o.startswith(flag):
                    asked[key] = o[len(flag) :].split(":")[-1]
        jobs.setdefault(rule, []).append(asked)
    return {rule: sorted(v, key=str) for rule, v in jobs.items()}


def test_a_dry_run_with_the_slurm_profile_shows_what_slurm_gets(cluster, workflow):
    """`snakemake -n --profile slurm` runs Snakemake's dry-run executor; its jobs still ask for what
    the SLURM executor submits: the GPUs (not this machine's none) and the judge's replicas, one per GPU
    of a judge node (slurm.judge.gpus_per_node)."""
    # One shard (what each generation job asks for does not depend on their number), and the run stops
    # at the judge's merged output: the jobs after it run on this machine, not on SLURM.
    cfg = workflow.write_config(
        "dry.yaml",
        run="dry",
        shards=1,
        judge={**SMALL["judge"], "parallel": "replicas"},
        slurm={"arrays": False, "judge": {"gpus_per_node": 2}},
        **{k: v for k, v in SMALL.items() if k != "judge"},
    )
    target = "results/dry/judge/demo-judge/raw.parquet"
    dry = workflow.run("--profile", "slurm", "-n", target, "--configfile", cfg, env=slurm_env(cluster)).stdout
    planned = dry_run_jobs(dry)
    assert [j["gpu"] for j in planned["generate"]] == ["1"]
    assert [j["gpu"] for j in planned["judge"]] == ["1"] * 2  # 2 replicas of one GPU
    since = last_job_id(cluster)
    proc = workflow.run(
        "--profile", "slurm", *FAST_POLL, "--verbose", target, "--configfile", cfg, env=slurm_env(cluster), timeout=900
    )
    assert submitted_jobs(re.findall(r"sbatch call: (.+)", proc.stdout + proc.stderr)) == planned
    got = jobs_of(cluster, since)
    assert sorted((j["rule"], j["gpus"]) for j in got) == [("generate", "gres:gpu:1")] + [("judge", "gres:gpu:1")] * 2


def wait_for(predicate, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def start(workflow, cluster, cfg, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--profile", "slurm", *FAST_POLL, *extra, "--configfile", str(cfg)],
        cwd=workflow.path,
        env=slurm_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def is_shard(job, shard):
    return job["rule"] == "generate" and job["comment"].endswith(f"_{shard}")


def running_generate(cluster, since, shard):
    for j in jobs_of(cluster, since):
        if is_shard(j, shard) and j["state"] == "RUNNING":
            return j
    return None


@pytest.fixture(scope="module")
def cancelled_and_rerun(cluster, built_models, tmp_path_factory):
    """One study of 2 shards for the cancelled-shard and the retry tests, run twice with one job slot
    (fewer job slots than shards: arrays would stall in the plugin, so each shard is a job of its own).
    Each run's job of shard 1 is cancelled while it runs (as on preemption or node failure): the first run
    has no retries and fails with shard 0's generations only; the rerun has one retry and completes."""
    workflow = new_workflow(tmp_path_factory.mktemp("cancel"), built_models)
    cfg = workflow.write_config("cancel.yaml", run="cancel", shards=2, **SMALL)

    def cancel_shard_1(retries):
        since = last_job_id(cluster)
        proc = start(workflow, cluster, cfg, "--retries", str(retries), "--jobs", "1")
        job = wait_for(lambda: running_generate(cluster, since, 1), timeout=600, what="shard 1 running")
        cluster.run("scancel", str(job["id"]))
        out = proc.communicate(timeout=900)[0]
        return {"out": out, "returncode": proc.returncode, "jobs": jobs_of(cluster, since)}

    first = cancel_shard_1(retries=0)
    first["gens"] = sorted(
        p.name for p in (workflow.results("cancel") / "generations" / "demo-generator" / "questions").glob("*.parquet")
    )
    return {"workflow": workflow, "first": first, "rerun": cancel_shard_1(retries=1)}


def test_failed_first_attempt_is_retried_with_more_time_and_memory(cancelled_and_rerun):
    # The shared study's rerun: its first attempt of shard 1 died, and one retry was allowed.
    rerun = cancelled_and_rerun["rerun"]
    out = rerun["out"]
    assert rerun["returncode"] == 0, out[-4000:]
    assert "job arrays: off for this run: 2 generation jobs but jobs: 1" in out
    attempts = [j for j in rerun["jobs"] if is_shard(j, 1)]
    assert len(attempts) == 2
    assert attempts[0]["state"] == "CANCELLED" and attempts[1]["state"] == "COMPLETED"
    assert attempts[0]["time_limit"] == "00:10:00" and attempts[1]["time_limit"] == "00:20:00"
    mem = [int(re.match(r"(\d+)", j["mem"]).group(1)) for j in attempts]
    assert mem[1] == 2 * mem[0]
    assert (cancelled_and_rerun["workflow"].results("cancel") / "report" / "summary.json").exists()


def test_cancelled_shard_reruns_alone(cancelled_and_rerun):
    first, rerun = cancelled_and_rerun["first"], cancelled_and_rerun["rerun"]
    assert first["returncode"] != 0
    assert first["gens"] == ["0.parquet"]

    # What the rerun planned (its own Job stats table): shard 1's generation and what follows it.
    assert planned_jobs(subprocess.CompletedProcess([], rerun["returncode"], rerun["out"], "")) == {
        "generate": "1",
        "merge": "1",
        "judge": "1",
        "merge_judge": "1",
        "parse_verdicts": "1",
        "report": "1",
        "all": "1",
        "total": "7",
    }
    # What it submitted: shard 1 only (its cancelled first attempt and the retry), then the judge.
    assert [is_shard(j, 1) for j in rerun["jobs"] if j["rule"] == "generate"] == [True, True]
    assert sorted(j["rule"] for j in rerun["jobs"]) == ["generate", "generate", "judge"]


def overlapping(a, b):
    return a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]


def test_shards_go_out_as_arrays_of_the_limit_and_each_role_to_its_partition(cluster, workflow):
    # 6 shards, arrays of up to 4 tasks: a full array and a partial one, more tasks than the node's 4 GPUs.
    slurm = {"array_limit": 4, "generate": {"partition": "small"}, "judge": {"partition": "large"}}
    cfg = workflow.write_config("arrays.yaml", run="arrays", shards=6, slurm=slurm, **SMALL)
    since = last_job_id(cluster)
    # The run stops at the judge's merged output (what is read of the judge): the jobs after it are local.
    target = "results/arrays/judge/demo-judge/raw.parquet"
    proc = workflow.run(
        "--profile", "slurm", *FAST_POLL, "--verbose", target, "--configfile", cfg, env=slurm_env(cluster), timeout=1500
    )
    log = proc.stdout + proc.stderr
    assert "job arrays: 6 generation jobs in arrays of up to 4 tasks" in log
    calls = re.findall(r"sbatch call: (.+)", log)
    generate = [c for c in calls if "rule_generate" in c]
    judge = [c for c in calls if "rule_judge" in c]
    assert len(generate) == 2 and len(judge) == 1, calls
    assert sorted(re.search(r"--array=(\S+)", c).group(1) for c in generate) == ["1-4", "5-6"]
    assert "--array" not in judge[0]
    # The options are the preview's; the plugin adds --array and a little memory for the array's payload.
    promised = preview_options(sbatch_preview(workflow, cfg, cluster))
    assert sbatch_options(judge[0]) == promised["judge"]
    for call in generate:
        got = {o for o in sbatch_options(call) if not o.startswith(("--array", "--mem"))}
        assert got == {o for o in promised["generate"] if not o.startswith("--mem")}
        extra = int(re.search(r"--mem (\d+)", call).group(1)) - 1000
        assert 1 <= extra <= 8, call

    tasks = [j for j in jobs_of(cluster, since) if j["rule"] == "generate"]
    assert len(tasks) == 6 and len({j["array_job"] for j in tasks}) == 2
    assert {j["partition"] for j in tasks} == {"small"}
    metas = workflow.metas("arrays")
    assert len(metas) == 6 and sum(m["n_items"] for m in metas) == 44
    for m in metas:
        assert m["gpu_source"] == "slurm" and m["slurm_partition"] == "small" and m["slurm_array"]
        assert re.fullmatch(r"[0-3]", m["cuda_visible_devices"]), m["cuda_visible_devices"]
    # Every task on a GPU of its own: tasks that ran at the same time never shared one.
    pairs = [(a, b) for i, a in enumerate(metas) for b in metas[i + 1 :] if overlapping(a, b)]
    assert pairs, "no two tasks ran at the same time"
    assert all(a["cuda_visible_devices"] != b["cuda_visible_devices"] for a, b in pairs)
    judge_meta = json.loads((workflow.results("arrays") / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge_meta["slurm_partition"] == "large" and judge_meta["slurm_array"] is None
    assert judge_meta["cuda_visible_devices"] == "0,1,2,3"


def write_numbers(path, n):
    with open(path, "w") as fh:
        for i in range(n):
            q = {"id": f"q{i:05d}", "question": f"What is {i} + {i % 7}?", "answer": str(i + i % 7), "category": "sum"}
            fh.write(json.dumps(q) + "\n")


def ended_before_requeue(cluster, task: str) -> str | None:
    """How SLURM recorded array task `task` ("40_1") ending on its own before `scontrol requeue`
    reached it ("WEXITSTATUS 1"), from slurmctld's log; None when the requeue found it running.
    A running task's requeue is logged as "Requeuing JobId=40_1(41)" and its kill is not logged
    as a completion; a task that ended first is logged as "_job_complete: JobId=40_1(41) ..."."""
    log = (cluster.root / "slurmctld.log").read_text()
    before = log[: log.index(f"Requeuing JobId={task}(")]  # the requeue itself is always logged
    end = re.search(rf"_job_complete: JobId={re.escape(task)}\(\d+\) (W\w+ \d+)", before)
    return end.group(1) if end else None


def slurm_job_logs(workflow) -> str:
    logs = sorted((workflow.path / ".snakemake" / "slurm_logs").rglob("*.log"))
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)


def shard_of_task(workflow, job: dict) -> int | None:
    """The shard an array task runs, from the job log the SLURM plugin writes for it."""
    log = workflow.path / ".snakemake" / "slurm_logs" / "rule_generate" / f"{job['array_job']}_{job['array_task']}.log"
    m = re.search(r"wildcards: .*shard=(\d+)", log.read_text()) if log.exists() else None
    return int(m.group(1)) if m else None


def checkpointed(store: Path, writer_suffix: str) -> int:
    """Records the store's logs hold from the writers whose name ends with `writer_suffix` (a log's first
    line names its writer: genjudge.store.item_store)."""
    n = 0
    for log in (store / "logs").glob("*.jsonl") if store.exists() else []:
        with log.open("rb") as f:
            head = f.readline()
            if head.endswith(b"\n") and json.loads(head)["log"]["writer"].endswith(writer_suffix):
                n += sum(1 for line in f if line.endswith(b"\n"))
    return n


def requeue_running_task(workflow, cluster, run: str, kw: dict, n: int) -> dict:
    """Run `run` on the cluster and `scontrol requeue` its array's first running generation task once that
    task has checkpointed an eighth of its items, then let SLURM start it again at once."""
    cache = f"results/.cache-{run}"
    cfg = workflow.write_config(f"{run}.yaml", run=run, cache_dir=cache, slurm={"requeue": True}, **kw)
    merged = f"results/{run}/generations/demo-generator/numbers.parquet"
    store = workflow.path / cache / "generations"
    since = last_job_id(cluster)
    proc = start(workflow, cluster, cfg, merged)

    def running_first():
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        running = [j for j in jobs_of(cluster, since) if j["rule"] == "generate" and j["state"] == "RUNNING"]
        # The array's first task: the one every other task's Snakemake used to check (plugin issue #447).
        return min(running, key=lambda j: int(j["array_task"])) if running else None

    first = wait_for(running_first, timeout=600, what="a running generation task")
    # Shard 0 is falsy: wait for a shard found, not for a true one.
    (shard,) = wait_for(
        lambda: (s,) if (s := shard_of_task(workflow, first)) is not None else None,
        what=f"the shard of task {first['id']}",
    )

    # Its own records, not the other task's: the tasks may start far apart, and a task whose items are
    # all done before the requeue would resume everything and compute nothing.
    def started_on_its_items():
        assert proc.poll() is None, proc.communicate()[0][-4000:]
        return checkpointed(store, f"-shard{shard}") >= n // 2 // 8

    wait_for(started_on_its_items, timeout=600, what=f"an eighth of shard {shard}'s items checkpointed")
    task = f"{first['array_job']}_{first['array_task']}"  # the array job's own id would requeue every task
    cluster.run("scontrol", "requeue", task)
    # Once SLURM holds it back for its requeue delay (the first run has ended), it may start at once.
    wait_for(
        lambda: any(
            j["id"] == first["id"] and j["state"] == "PENDING" and j["reason"] == "BeginTime"
            for j in jobs_of(cluster, since)
        )
    )
    cluster.run("scontrol", "update", f"JobId={task}", "StartTime=now")
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 0, out[-4000:]
    return {"out": out, "task": task, "since": since, "store": store, "merged": merged}


def test_requeued_array_task_resumes_from_its_checkpoint(cluster, workflow):
    """`scontrol requeue` of a running generation task (as preemption does): SLURM runs it again,
    it resumes, Snakemake sees no failure, and the merged generations equal an uninterrupted run's."""
    from genjudge.store.item_store import count_keys

    n = 1600
    write_numbers(workflow.path / "numbers.jsonl", n)
    kw = {
        **SMALL,
        "dataset": {"path": "numbers.jsonl"},
        "shards": 2,
        "generator": {"batch_size": 1, "max_new_tokens": 8},
    }
    ended = []
    for run in ("requeue", "requeue-again"):
        r = requeue_running_task(workflow, cluster, run, kw, n)
        end = ended_before_requeue(cluster, r["task"])
        if end is None:
            break
        # SLURM recorded the task's own end before the requeue reached it: the requeue restarted a
        # finished job, which is not the scenario under test, so it is played once more.
        ended.append(f"{run}: task {r['task']} ended with {end} before the requeue")
        warnings.warn(ended[-1], stacklevel=1)
    else:
        pytest.fail("\n".join(ended) + "\nSLURM job logs:\n" + slurm_job_logs(workflow))

    assert "Error in rule" not in r["out"], f"{r['out'][-4000:]}\n{slurm_job_logs(workflow)}"
    tasks = [j for j in jobs_of(cluster, r["since"]) if j["rule"] == "generate"]
    assert len(tasks) == 2 and len({j["array_job"] for j in tasks}) == 1  # no resubmission: no failed attempt
    assert all(j["state"] == "COMPLETED" and j["time_limit"] == "00:10:00" and j["requeue"] == "1" for j in tasks)
    assert sorted(j["restarts"] for j in tasks) == [0, 1]
    metas = workflow.metas(run)
    requeued = [m for m in metas if m["slurm_restarts"] == 1]
    assert len(requeued) == 1
    m = requeued[0]
    assert m["resumed_items"] > 0 and m["computed_items"] > 0, m
    assert m["resumed_items"] + m["computed_items"] == m["n_items"] == n // 2
    assert count_keys(r["store"]) == n  # nothing computed twice

    ref = workflow.write_config("ref.yaml", run="ref", cache_dir="results/.refcache", **kw)
    workflow.run("results/ref/generations/demo-generator/numbers.parquet", "--cores", "2", "--configfile", ref)
    got = pd.read_parquet(workflow.path / r["merged"])
    want = pd.read_parquet(workflow.results("ref") / "generations" / "demo-generator" / "numbers.parquet")
    pd.testing.assert_frame_equal(got, want)


@pytest.fixture
def judge_server():
    """vLLM's OpenAI server for the demo judge on loopback, the run's shared one (tests/endpoints.py
    shared_servers; 75-150 s to start on 2 cores)."""
    from endpoints import shared_servers

    return shared_servers("models/demo-judge")[0]


def judge_calls(log: str) -> dict:
    """The judge jobs' sbatch calls in a --verbose log, by judge name."""
    calls = re.findall(r"sbatch call: (.+)", log)
    return {
        re.search(r"--comment '?rule_judge_wildcards_(.+?)_\d+_\d+", c).group(1): c for c in calls if "rule_judge" in c
    }


def rule_blocks(dry: str, rule: str) -> dict:
    """`snakemake -n`'s jobs of one rule: its first wildcard's value -> the resources it asks for."""
    jobs = {}
    for block in re.split(r"\n(?=rule \w+:)", dry):
        if block.startswith(f"rule {rule}:"):
            wildcard = re.search(r"wildcards: \w+=([^,\n]+)", block).group(1)
            jobs[wildcard] = dict(kv.split("=", 1) for kv in re.search(r"resources: (.*)", block).group(1).split(", "))
    return jobs


@pytest.mark.vllm
@pytest.mark.servers
def test_an_endpoint_judge_asks_for_no_gpu_and_runs_while_a_judge_holds_every_gpu(cluster, workflow, judge_server):
    """Two judges of the same generations, ready together: the demo judge on every GPU of the node
    (judge.gpus: all) and the demo judge behind vLLM's OpenAI server. The endpoint judge's sbatch asks
    for no GPU, only resources.endpoint's memory, time and CPU, so SLURM runs it beside the judge that
    holds all 4 GPUs; had it asked for one, it would have waited for that judge to end."""
    from endpoints import FaultProxy

    # Each answer 3 s late: the endpoint judge (a probe, then 44 requests 16 at a time) outlasts any
    # gap between the two jobs' starts, so the two overlap whenever SLURM lets them.
    proxy = FaultProxy(judge_server.url, delay=3)
    kw = {
        "shards": 1,
        "generator": SMALL["generator"],
        "judge": {"max_new_tokens": 16},
        "resources": {**SMALL["resources"], "endpoint": {"mem_mb": 1500, "runtime": 7, "cpus": 1}},
        "judges": {
            "local": {},
            "api": {"model": "models/demo-judge", "engine": "openai", "endpoint": {"base_url": proxy.url}},
        },
    }
    cfg = workflow.write_config("endpoint.yaml", run="endpoint", **kw)
    since = last_job_id(cluster)
    try:
        proc = workflow.run(
            "--profile", "slurm", *FAST_POLL, "--verbose", "--configfile", cfg, env=slurm_env(cluster), timeout=900
        )
    finally:
        proxy.stop()

    # The sbatch calls: the endpoint judge's has no --gpus or --gres and is what the preview promised.
    calls = judge_calls(proc.stdout + proc.stderr)
    assert set(calls) == {"local", "api"}, calls
    api, local = sbatch_options(calls["api"]), sbatch_options(calls["local"])
    assert not [o for o in api if o.startswith(("--gpus", "--gres"))], calls["api"]
    assert {"--mem 1500", "-t 7", "--cpus-per-task=1"} <= api, calls["api"]
    assert "--gpus=4" in local, calls["local"]
    preview = sbatch_preview(workflow, cfg, cluster)
    promised = re.search(r"^judge \(api, 1 job\(s\)\): (.+)$", preview, re.M).group(1)
    assert api == sbatch_options(promised), (api, promised)

    # What SLURM holds for each: no GPU and 1500 MB for the endpoint judge, all 4 GPUs for the other.
    res = workflow.results("endpoint")
    metas = {j: json.loads((res / "judge" / j / "raw.meta.json").read_text()) for j in ("local", "api")}
    jobs = {j["id"]: j for j in jobs_of(cluster, since)}
    slurm = {name: jobs[int(m["slurm_job_id"])] for name, m in metas.items()}
    assert slurm["api"]["gpus"] == "" and slurm["api"]["mem"] == "1500M" and slurm["api"]["time_limit"] == "00:07:00"
    assert slurm["local"]["gpus"] == f"gres:gpu:{cluster.gpus}"
    assert metas["local"]["cuda_visible_devices"] == "0,1,2,3" and metas["api"]["gpus"] == []
    assert metas["api"]["engine"] == "openai" and metas["api"]["endpoint"]["completed"] == 44

    # It ran while the other judge held every GPU: SLURM's allocations overlap, and so do the jobs' own
    # runs (their metas, inside the allocations). The generation job had ended before either started.
    assert slurm["api"]["start"] < slurm["local"]["end"] and slurm["local"]["start"] < slurm["api"]["end"], slurm
    a, b = metas["api"], metas["local"]
    overlap = min(a["finished_at"], b["finished_at"]) - max(a["started_at"], b["started_at"])
    assert overlap > 0, (a["started_at"], a["finished_at"], b["started_at"], b["finished_at"])
    (gen,) = workflow.metas("endpoint")
    assert gen["finished_at"] < min(a["started_at"], b["started_at"])
    print(
        f"endpoint judge: job {slurm['api']['id']} {slurm['api']['start']}..{slurm['api']['end']}, ran "
        f"{a['finished_at'] - a['started_at']:.1f} s; 4-GPU judge: job {slurm['local']['id']} "
        f"{slurm['local']['start']}..{slurm['local']['end']}, ran {b['finished_at'] - b['started_at']:.1f} s; "
        f"together {overlap:.1f} s; sbatch of the endpoint judge: {' '.join(sorted(api))}"
    )

    # Every verdict of both judges is there.
    for name in ("local", "api"):
        judged = pd.read_parquet(res / "judgments" / f"{name}.parquet")
        assert len(judged) == 44 and judged["verdict"].notna().all(), name
    assert (res / "report" / "summary.json").exists()

    # A GPU model for the role goes only to the jobs with GPUs (the plugin makes --gpus=<model>:0 of it).
    typed = workflow.write_config("endpoint-typed.yaml", run="endpoint", slurm={"gpu_model": "demo"}, **kw)
    dry = workflow.run("--profile", "slurm", "-n", "--forceall", "--configfile", typed, env=slurm_env(cluster)).stdout
    judges = rule_blocks(dry, "judge")
    assert judges["local"]["gpu_model"] == "demo" and judges["local"]["gpu"] == "4"
    assert judges["api"]["gpu"] == "0" and "gpu_model" not in judges["api"], judges["api"]
    assert rule_blocks(dry, "generate")["demo-generator"]["gpu_model"] == "demo"
