"""Reruns: killed jobs resume from their checkpoint, the item cache spans shard layouts."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pandas as pd
import psutil
import pytest
from conftest import clean_env, new_workflow, planned_jobs

from genjudge.store.item_store import count_keys

pytestmark = pytest.mark.workflow


def write_dataset(path, n):
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "id": f"q{i:04d}",
                        "question": f"What is {i} + {i % 7}? Answer briefly.",
                        "answer": str(i + i % 7),
                        "category": ["even", "odd"][i % 2],
                    }
                )
                + "\n"
            )


def complete_lines(store_dir):
    """Items checkpointed in an item store directory so far (records a key links to)."""
    return count_keys(store_dir) if store_dir.exists() else 0


def kill_job_when(proc, script, store_file, at_least, timeout=300, sig=signal.SIGKILL):
    """`sig` (SIGKILL) to the job process running `script` once `store_file` holds `at_least` records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if complete_lines(store_file) >= at_least:
            for child in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if any(script in part for part in child.cmdline()):
                        child.send_signal(sig)
                        return
                except psutil.NoSuchProcess:
                    continue
        if proc.poll() is not None:
            raise AssertionError("workflow finished before the job could be killed")
        time.sleep(0.01)
    raise AssertionError("the job never reached the kill point")


def start(workflow, cfg):
    return subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(cfg)],
        cwd=workflow.path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


BIG = 120


def kill_judge_halfway(workflow, cfg, n=BIG, sig=signal.SIGKILL):
    """Run `cfg` and send `sig` (SIGKILL) to its judge job once half of its `n` items are checkpointed; the
    workflow fails and the judge's store holds at least that half, not all. Returns the store."""
    store = workflow.path / "results/.cache/judge"
    proc = start(workflow, cfg)
    kill_job_when(proc, "judge.py", store, n // 2, sig=sig)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode != 0, out[-2000:]
    return store


def reference_run(workflow, cfg_kw, *targets):
    """The same config, uninterrupted, with a cache of its own (up to `targets` where given)."""
    cfg = workflow.write_config("ref.yaml", **{**cfg_kw, "run": "ref", "cache_dir": "results/.refcache"})
    workflow.run("--cores", "2", *targets, "--configfile", cfg)
    return workflow.results("ref")


# Slow enough generations and verdicts (batches of 2, 32 new tokens) to kill each job halfway.
BIG_KW = {
    "dataset": {"path": "big.jsonl"},
    "shards": 1,
    "generator": {"batch_size": 2, "max_new_tokens": 32},
    "judge": {"batch_size": 2, "max_new_tokens": 32},
}
MERGED = "generations/demo-generator/big.parquet"  # what the generation job makes
JUDGMENTS = "judgments/demo-judge.parquet"  # what the judge decides: the report is other tests'


@pytest.fixture(scope="module")
def big_resumed(tmp_path_factory, built_models):
    """A run whose generation job was SIGKILLed halfway; its rerun resumed the generation (what the
    generation test checks, kept as it was then) and went on to the judge job, SIGKILLed halfway in
    turn; a third run resumed the judge up to its judgments (what the judge test checks). And the same
    config run uninterrupted with a cache of its own up to its judgments (what both compare with)."""
    workflow = new_workflow(tmp_path_factory.mktemp("big"), built_models)
    write_dataset(workflow.path / "big.jsonl", BIG)
    cfg = workflow.write_config(**BIG_KW)
    store = workflow.path / "results/.cache/generations"
    proc = start(workflow, cfg)
    kill_job_when(proc, "generate.py", store, BIG // 2)
    out = proc.communicate(timeout=600)[0]
    killed = SimpleNamespace(
        returncode=proc.returncode,
        out=out,
        checkpointed=complete_lines(store),
        shard_written=(workflow.results() / "generations" / "demo-generator" / "big" / "0.parquet").exists(),
    )
    # The rerun resumes the generation job, merges it, and its judge job (the next) is killed halfway.
    judge_store = kill_judge_halfway(workflow, cfg)
    resumed = SimpleNamespace(meta=workflow.metas()[0], stored=complete_lines(store))
    judge_killed = SimpleNamespace(checkpointed=complete_lines(judge_store))
    rerun = workflow.run("--cores", "2", f"results/demo/{JUDGMENTS}", "--configfile", cfg)
    judge_resumed = SimpleNamespace(
        plan=planned_jobs(rerun),
        meta=json.loads((workflow.results() / "judge" / "demo-judge" / "raw.meta.json").read_text()),
    )
    ref = reference_run(workflow, BIG_KW, f"results/ref/{JUDGMENTS}")
    return SimpleNamespace(
        workflow=workflow,
        killed=killed,
        resumed=resumed,
        judge_killed=judge_killed,
        judge_resumed=judge_resumed,
        ref=ref,
    )


def test_generation_killed_halfway_resumes_from_its_checkpoint(big_resumed):
    run = big_resumed
    assert run.killed.returncode != 0, run.killed.out[-2000:]
    checkpointed = run.killed.checkpointed
    assert BIG // 2 <= checkpointed < BIG
    assert not run.killed.shard_written

    meta = run.resumed.meta
    assert meta["resumed_items"] == checkpointed
    assert meta["computed_items"] == BIG - checkpointed
    assert run.resumed.stored == BIG  # nothing done twice

    merged = run.workflow.results() / MERGED
    pd.testing.assert_frame_equal(pd.read_parquet(merged), pd.read_parquet(run.ref / MERGED))


def test_judge_killed_halfway_resumes_from_its_checkpoint(big_resumed):
    """The judge job of the fixture's rerun (its generations done: the judge was the next job) was killed
    halfway (kill_judge_halfway asserts the run failed); the run after it planned the judge alone."""
    run = big_resumed
    checkpointed = run.judge_killed.checkpointed
    assert BIG // 2 <= checkpointed < BIG

    jobs = run.judge_resumed.plan
    assert "generate" not in jobs and jobs["judge"] == "1"
    meta = run.judge_resumed.meta
    assert meta["resumed_items"] == checkpointed and meta["computed_items"] == BIG - checkpointed
    workflow, ref = run.workflow, run.ref
    pd.testing.assert_frame_equal(pd.read_parquet(workflow.results() / JUDGMENTS), pd.read_parquet(ref / JUDGMENTS))


FAST = {"shards": 1, "generator": {"max_new_tokens": 8}, "judge": {"max_new_tokens": 4}}


@pytest.fixture(scope="module")
def run_a(tmp_path_factory, built_models):
    """One finished run `a` (one shard, short answers and verdicts) computed from nothing, in a cache of its
    own (results/.cache-a); tests that run more start from a copy."""
    workflow = new_workflow(tmp_path_factory.mktemp("a"), built_models)
    cfg = workflow.write_config("a.yaml", run="a", cache_dir="results/.cache-a", **FAST)
    workflow.run("--cores", "2", "--configfile", cfg)
    return workflow


def test_changing_the_shard_count_regenerates_nothing_but_new_settings_regenerate_all(run_a, tmp_path):
    workflow = run_a.copy(tmp_path)
    first = pd.read_parquet(workflow.results("a") / "generations" / "demo-generator" / "questions.parquet")
    assert sum(m["computed_items"] for m in workflow.metas("a")) == 44

    # The same run in two shards instead of one, on the same cache.
    cache = {"cache_dir": "results/.cache-a"}
    cfg2 = workflow.write_config("two.yaml", **{**FAST, **cache, "run": "two", "shards": 2})
    targets = ["results/two/generations/demo-generator/questions.parquet", "results/two/judge/demo-judge/raw.parquet"]
    workflow.run("--cores", "2", *targets, "--configfile", cfg2)  # what is read: no verdicts, no report
    metas = workflow.metas("two")
    assert len(metas) == 2
    assert sum(m["computed_items"] for m in metas) == 0 and sum(m["resumed_items"] for m in metas) == 44
    judge = json.loads((workflow.results("two") / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge["computed_items"] == 0
    second = pd.read_parquet(workflow.results("two") / "generations" / "demo-generator" / "questions.parquet")
    assert first.drop(columns="shard").equals(second.drop(columns="shard"))

    cfg_new = workflow.write_config(
        "longer.yaml", **cache, run="longer", shards=1, generator={"max_new_tokens": 9}, judge={"max_new_tokens": 4}
    )
    merged = "results/longer/generations/demo-generator/questions.parquet"
    workflow.run("--cores", "2", merged, "--configfile", cfg_new)
    assert sum(m["computed_items"] for m in workflow.metas("longer")) == 44


def test_one_failing_shard_does_not_stop_the_others_and_a_rerun_runs_only_it(workflow):
    cfg = workflow.write_config(shards=3, generator={"max_new_tokens": 8}, judge={"max_new_tokens": 4})
    workflow.run("results/demo/items/questions.parquet", "--cores", "2", "--configfile", cfg)
    shard1 = workflow.results() / "shards" / "questions" / "1.jsonl"
    good = shard1.read_bytes()
    shard1.write_text('{"id": "broken\n')
    # The documented command: no --keep-going, which the default workflow profile sets.
    proc = workflow.run("--cores", "2", "--configfile", cfg, check=False)
    assert proc.returncode != 0
    assert "1.jsonl, line 1" in proc.stdout + proc.stderr
    gens = workflow.results() / "generations" / "demo-generator" / "questions"
    # The failure is recorded: no rows, the error in the meta; the other shards are complete.
    metas = [json.loads((gens / f"{i}.meta.json").read_text()) for i in range(3)]
    assert [m["error"] is not None for m in metas] == [False, True, False]
    assert [len(pd.read_parquet(gens / f"{i}.parquet")) for i in range(3)] == [15, 0, 14]
    assert "1.jsonl, line 1" in metas[1]["error"]["message"]
    summary = json.loads((workflow.results() / "report" / "summary.json").read_text())
    assert [(f["generator"], f["stage"]) for f in summary["failed_cells"]] == [("demo-generator", "generate")]

    shard1.write_bytes(good)
    rerun = workflow.run("--cores", "2", "--configfile", cfg)
    assert planned_jobs(rerun) == {
        "generate": "1",
        "merge": "1",
        "judge": "1",
        "merge_judge": "1",
        "parse_verdicts": "1",
        "report": "1",
        "all": "1",
        "total": "7",
    }
    assert (workflow.results() / "report" / "summary.json").exists()


def test_greedy_runs_are_byte_identical_and_provenance_is_recorded(run_a, tmp_path):
    workflow = run_a.copy(tmp_path)
    cfg = workflow.write_config("b.yaml", run="b", cache_dir="results/.cache-b", **FAST)
    # The same config, computed again from nothing up to the judgments (the report read is a's).
    workflow.run("--cores", "2", "results/b/judgments/demo-judge.parquet", "--configfile", cfg)
    for name in (
        "generations/demo-generator/questions.parquet",
        "judge/demo-judge/raw.parquet",
        "judgments/demo-judge.parquet",
    ):
        assert (workflow.results("a") / name).read_bytes() == (workflow.results("b") / name).read_bytes(), name
    prov = json.loads((workflow.results("a") / "report" / "provenance.json").read_text())
    assert prov["config"]["run"] == "a" and len(prov["config_sha256"]) == 64
    assert {"snakemake", "torch", "transformers", "accelerate", "pandas"} <= set(prov["packages"])
    assert prov["models"]["generators"]["demo-generator"]["fingerprint"]
    assert prov["models"]["judges"]["demo-judge"]["fingerprint"]
    assert "git" in prov
    ds = prov["inputs"]["datasets"]["questions"]
    assert ds["sha256"] == hashlib.sha256((workflow.path / ds["path"]).read_bytes()).hexdigest()
    assert prov["inputs"]["labels"] == {}


def job_processes(proc, script):
    """The running processes below `proc` whose command line runs `script`."""
    out = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if any(script in part for part in child.cmdline()):
                out.append(child)
        except psutil.NoSuchProcess:
            continue
    return out


def interrupt_when_running(workflow, cfg, store, at_least, group: bool, within=10.0, sig=signal.SIGINT):
    """Start `cfg` in a session of its own, and once `store` holds `at_least` records send `sig` to the
    process group (a terminal's Ctrl-C) or to snakemake alone (`kill -INT PID`, `kill PID`). Every generation
    job must be gone `within` seconds and snakemake must end with an error. Returns (stored at the signal,
    its output). `within`: the job's own backstop (interrupt.GRACE_SECONDS, 5 s) and 5 s for a loaded machine."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(cfg)],
        cwd=workflow.path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the Ctrl-C reaches it, not pytest
    )
    deadline = time.monotonic() + 300
    while complete_lines(store) < at_least or len(job_processes(proc, "generate.py")) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the jobs never got going"
        time.sleep(0.05)
    jobs = job_processes(proc, "generate.py")
    stored = complete_lines(store)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    name = signal.Signals(sig).name
    t0 = time.monotonic()
    gone, alive = psutil.wait_procs(jobs, timeout=within)
    stopped = time.monotonic() - t0
    assert not alive, (
        f"{len(alive)} job(s) still running {within} s after {name} to the {'group' if group else 'snakemake'}"
    )
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, out[-2000:]
    print(
        f"{name} to the {'group' if group else 'snakemake process'}: jobs gone {stopped:.1f} s after, "
        f"snakemake {time.monotonic() - t0:.1f} s after"
    )
    return stored, stopped, out


def test_ctrl_c_stops_every_job_within_seconds_keeps_what_was_stored_and_every_attempts_log(workflow):
    """SIGINT to the process group (Ctrl-C), then to snakemake alone (kill -INT), then SIGTERM to snakemake
    alone (kill; Snakemake's own handler would wait for the jobs to end): both running generation jobs stop
    within seconds each time; the rerun resumes from every stored item; each attempt's log is kept."""
    n = 1200  # far more than the jobs finish in the seconds the test allows them after the signal
    write_dataset(workflow.path / "big.jsonl", n)
    kw = {"dataset": {"path": "big.jsonl"}, "shards": 2, "generator": {"batch_size": 1, "max_new_tokens": 32}}
    cfg = workflow.write_config(**kw)
    store = workflow.path / "results/.cache/generations"
    first, _, out = interrupt_when_running(workflow, cfg, store, 10, group=True)
    assert "Exception ignored" not in out and complete_lines(store) >= first
    second, _, out = interrupt_when_running(workflow, cfg, store, complete_lines(store) + 10, group=False)
    assert "Exception ignored" not in out
    third, _, out = interrupt_when_running(
        workflow, cfg, store, complete_lines(store) + 10, group=False, sig=signal.SIGTERM
    )
    assert "Exception ignored" not in out
    kept = complete_lines(store)
    assert first < second < third <= kept < n  # nothing stored was lost, and the jobs did not run on to the end

    # The rerun in one shard (the item cache spans shard layouts; one job, one model load): shard 0's job,
    # its log the same file, resumes every item both jobs stored.
    merged = "results/demo/generations/demo-generator/big.parquet"
    workflow.run(
        "--cores",
        "2",
        merged,
        "--configfile",
        workflow.write_config(**{**kw, "shards": 1, "generator": {**kw["generator"], "batch_size": 16}}),
    )
    metas = workflow.metas()
    assert sum(m["resumed_items"] for m in metas) == kept and sum(m["computed_items"] for m in metas) == n - kept
    log = workflow.path / "logs/demo/generate/demo-generator/big/0.log"
    attempts = sorted((log.parent / f"{log.name}.attempts").glob("*.log"), key=lambda p: int(p.stem))
    assert [p.stem for p in attempts] == ["1", "2", "3", "4"]
    assert all("stopped by SIGINT" in p.read_text() for p in attempts[:2])
    assert "stopped by SIGTERM" in attempts[2].read_text()
    assert "done in" in attempts[3].read_text() and log.read_text() == attempts[3].read_text()
