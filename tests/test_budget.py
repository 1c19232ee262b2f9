"""tests/budget.py: a run's CPU log against tests/durations.json."""

import json
import os

import budget
import pytest

LOG = (
    # cpu, wall, id, snakemake runs, dry runs, jobs, jobs by rule, marks, outcome
    "30.0\t90.0\ttests/test_a.py::test_one\t2\t1\t8\tgenerate=4,judge=1,split=3\tworkflow\tok\n"
    "14.0\t20.0\ttests/test_a.py::test_two\t1\t0\t3\tgenerate=1,merge=2\tworkflow\tfailed\n"
    "4.0\t5.0\ttests/test_b.py::test_three\t1\t1\t0\t\t\tok\n"
    "1.5\t2.0\ttests/test_c.py::test_old_format\n"
)


def test_the_log_is_summed_by_module(tmp_path):
    (tmp_path / "cpu.tsv").write_text(LOG)
    modules, unmarked = budget.read_log(tmp_path / "cpu.tsv")
    a = modules["tests/test_a.py"]
    assert (a.cpu_s, a.wall_s, a.tests, a.snakemake_runs, a.dry_runs, a.jobs, a.failed) == (44, 110, 2, 3, 1, 11, 1)
    assert a.by_rule == {"generate": 5, "judge": 1, "split": 3, "merge": 2}
    assert modules["tests/test_c.py"].cpu_s == 1.5 and modules["tests/test_c.py"].jobs == 0
    assert unmarked == ["tests/test_b.py::test_three"]  # ran snakemake without the workflow mark
    table = budget.table(modules)
    assert "| test_a.py | 44 | 110 | 2 (1 failed) | 3 (1) | 11 | generate 5, split 3, merge 2, judge 1 |" in table


def test_a_module_over_30_percent_and_3_cpu_seconds_or_missing_is_named(tmp_path):
    (tmp_path / "cpu.tsv").write_text(LOG)
    modules, _ = budget.read_log(tmp_path / "cpu.tsv")
    within = {"cpu_s": 34.0, "snakemake_runs": 3, "jobs": 11}  # 44 is +29%
    grown = {"cpu_s": 33.0, "snakemake_runs": 3, "jobs": 9}  # 44 is +33%
    small = {"cpu_s": 2.0, "snakemake_runs": 1, "jobs": 0}  # 4 is +100%, but 2 CPU-s
    assert (
        budget.check(
            modules, {"modules": {"tests/test_a.py": within, "tests/test_b.py": small, "tests/test_c.py": small}}
        )
        == []
    )
    problems = budget.check(modules, {"modules": {"tests/test_a.py": grown, "tests/test_b.py": small}})
    assert len(problems) == 2
    assert problems[0].startswith("tests/test_a.py: 44 CPU-s against 33 budgeted (+33%); jobs 11 against 9")
    assert problems[1].startswith("tests/test_c.py: 2 CPU-s, not in durations.json")


def test_write_then_check_exits_0_and_a_grown_log_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(budget, "BUDGET", tmp_path / "durations.json")
    (tmp_path / "cpu.tsv").write_text(
        LOG.replace("tests/test_b.py::test_three\t1\t1\t0\t\t\t", "tests/test_b.py::test_three\t1\t1\t0\t\tworkflow\t")
    )
    assert budget.main([str(tmp_path / "cpu.tsv"), "--write", "a test"]) == 0
    assert "cpu.tsv: tests failed in tests/test_a.py: their figures may be off" in capsys.readouterr().out
    recorded = json.loads((tmp_path / "durations.json").read_text())
    assert recorded["measured"] == "a test" and recorded["modules"]["tests/test_a.py"]["cpu_s"] == 44.0
    assert budget.main([str(tmp_path / "cpu.tsv")]) == 0
    (tmp_path / "grown.tsv").write_text((tmp_path / "cpu.tsv").read_text().replace("30.0\t", "60.0\t"))
    assert budget.main([str(tmp_path / "grown.tsv")]) == 1
    assert "tests/test_a.py: 74 CPU-s against 44 budgeted (+68%)" in capsys.readouterr().out


def test_a_budget_written_from_two_runs_takes_each_modules_costliest_and_holds_for_both(tmp_path, monkeypatch):
    """A module whose cache was cold in one run (20 CPU-s against 6): the budget is its cold figure, and
    neither run is over it; a check reads one log."""
    monkeypatch.setattr(budget, "BUDGET", tmp_path / "durations.json")
    warm = (
        "6.0\t1\ttests/test_c.py::t\t0\t0\t0\t\t\tok\n50.0\t1\ttests/test_w.py::t\t2\t0\t8\tgenerate=8\tworkflow\tok\n"
    )
    cold = (
        "20.0\t1\ttests/test_c.py::t\t0\t0\t0\t\t\tok\n45.0\t1\ttests/test_w.py::t\t2\t0\t7\tgenerate=7\tworkflow\tok\n"
    )
    (tmp_path / "warm.tsv").write_text(warm)
    (tmp_path / "cold.tsv").write_text(cold)
    assert budget.main([str(tmp_path / "warm.tsv"), "--write", "one"]) == 0
    assert budget.main([str(tmp_path / "cold.tsv"), "--factor", "1"]) == 1  # one run's budget: the cold run is over
    assert budget.main([str(tmp_path / "warm.tsv"), str(tmp_path / "cold.tsv"), "--write", "two"]) == 0
    recorded = json.loads((tmp_path / "durations.json").read_text())["modules"]
    assert recorded["tests/test_c.py"] == {"cpu_s": 20.0, "snakemake_runs": 0, "jobs": 0}
    assert recorded["tests/test_w.py"] == {"cpu_s": 50.0, "snakemake_runs": 2, "jobs": 8}
    for run in ("warm.tsv", "cold.tsv"):
        assert budget.main([str(tmp_path / run), "--factor", "1"]) == 0
    for wrong in ([], ["--table"], ["--write", "three", "--table"]):
        with pytest.raises(SystemExit) as stopped:
            budget.main([str(tmp_path / "warm.tsv"), str(tmp_path / "cold.tsv"), *wrong])
        assert stopped.value.code == 2


def test_a_slower_machine_scales_the_budget_and_a_module_that_grew_beyond_it_is_named(tmp_path, capsys):
    """Six model-free modules and a workflow one, all twice their budget (a machine twice as slow), and
    one model-free module three times its budget: only that one is named, 50% over."""
    names = [f"tests/test_m{i}.py" for i in range(7)]
    recorded = {"modules": {n: {"cpu_s": 10.0, "snakemake_runs": 0, "jobs": 0} for n in names}}
    recorded["modules"]["tests/test_wf.py"] = {"cpu_s": 50.0, "snakemake_runs": 2, "jobs": 8}
    log = "".join(f"{30.0 if n.endswith('m6.py') else 20.0}\t1\t{n}::t\t0\t0\t0\t\t\tok\n" for n in names)
    log += "100.0\t1\ttests/test_wf.py::t\t2\t0\t8\tgenerate=8\tworkflow\tok\n"
    (tmp_path / "cpu.tsv").write_text(log)
    modules, _ = budget.read_log(tmp_path / "cpu.tsv")
    assert budget.machine_factor(modules, recorded) == (2.0, 7)
    assert budget.check(modules, recorded, 2.0) == [
        "tests/test_m6.py: 30 CPU-s against 10 budgeted x 2.00 for this machine (+50%); jobs 0 against 0, "
        "snakemake runs 0 against 0"
    ]
    assert len(budget.check(modules, recorded)) == 8  # as recorded, every module is over
    few = {"modules": {n: recorded["modules"][n] for n in names[:4]}}
    assert budget.machine_factor(modules, few) == (1.0, 4)  # too few to measure the machine by


def test_the_modules_that_run_snakemake_are_scaled_by_their_own_factor(tmp_path, capsys, monkeypatch):
    """A faster machine (as measured: 0.62 of the budget's CPU-s for the model-free modules, 0.72 for
    the workflow ones): six model-free modules at 0.6 of their budget, six workflow modules at 0.8 and
    one at 1.2 (50% beyond the others): only that one is named. Scaled by the model-free factor alone,
    every workflow module would be (0.8 is +33% of 0.6)."""
    free = [f"tests/test_m{i}.py" for i in range(6)]
    flows = [f"tests/test_w{i}.py" for i in range(7)]
    recorded = {"modules": {n: {"cpu_s": 10.0, "snakemake_runs": 0, "jobs": 0} for n in free}}
    recorded["modules"].update({n: {"cpu_s": 50.0, "snakemake_runs": 2, "jobs": 8} for n in flows})
    log = "".join(f"6.0\t1\t{n}::t\t0\t0\t0\t\t\tok\n" for n in free)
    log += "".join(
        f"{60.0 if n.endswith('w6.py') else 40.0}\t1\t{n}::t\t2\t0\t8\tgenerate=8\tworkflow\tok\n" for n in flows
    )
    (tmp_path / "cpu.tsv").write_text(log)
    modules, _ = budget.read_log(tmp_path / "cpu.tsv")
    assert budget.machine_factor(modules, recorded) == (pytest.approx(0.6), 6)
    assert budget.machine_factor(modules, recorded, processes=True) == (pytest.approx(0.8), 7)
    assert budget.check(modules, recorded, 0.6, 0.8) == [
        "tests/test_w6.py: 60 CPU-s against 50 budgeted x 0.80 for this machine (+50%); jobs 8 against 8, "
        "snakemake runs 2 against 2"
    ]
    assert len(budget.check(modules, recorded, 0.6)) == 7  # the model-free factor for all: each workflow module
    monkeypatch.setattr(budget, "BUDGET", tmp_path / "durations.json")
    budget.BUDGET.write_text(json.dumps(recorded))
    assert budget.main([str(tmp_path / "cpu.tsv")]) == 1
    out = capsys.readouterr().out
    assert "factor 0.80 for the 7 modules that run snakemake or its jobs" in out
    assert "tests/test_w6.py: 60 CPU-s" in out and "tests/test_w0.py" not in out and "1 over budget" in out


def test_the_slurm_clusters_reaper_counts_what_its_daemon_left_running(tmp_path):
    """tests/slurm/reaper.py, as the SLURM test cluster runs slurmd under it: a process its daemon
    started and left behind (as slurmd leaves each job's slurmstepd) is re-parented to the reaper, which
    waits for it and records its CPU, which no other process would count."""
    import subprocess
    import sys
    from pathlib import Path

    reaper = Path(__file__).parent / "slurm" / "reaper.py"
    cpu_file = tmp_path / "daemon.cpu"
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    # The "daemon" starts a detached burner and exits at once, before the burner ends.
    daemon = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {burn!r}])"
    proc = subprocess.run([sys.executable, str(reaper), str(cpu_file), sys.executable, "-c", daemon], timeout=60)
    assert proc.returncode == 0
    assert float(cpu_file.read_text()) >= 0.4  # the orphan's CPU, with the daemon's own


def test_the_reaper_stopped_stops_its_daemon_then_what_the_daemon_left_running(tmp_path):
    """SIGTERM to the reaper (the cluster's stop) reaches the daemon; once the daemon has ended, the job
    steps it left running are stopped too and waited for, so nothing outlives the cluster."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    reaper = Path(__file__).parent / "slurm" / "reaper.py"
    orphan_pid = tmp_path / "orphan.pid"
    # The "daemon" leaves a long job behind (detached, as slurmd leaves slurmstepd) and waits for SIGTERM.
    daemon = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        f"open({str(orphan_pid)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, str(reaper), str(tmp_path / "cpu"), sys.executable, "-c", daemon])
    try:
        deadline = time.monotonic() + 60
        while not (orphan_pid.exists() and orphan_pid.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphan = int(orphan_pid.read_text())
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # the daemon's status, as a shell gives it
        assert time.monotonic() - start < 10
        assert not os.path.exists(f"/proc/{orphan}")  # stopped and waited for: not even a zombie
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_process_log_is_summed_by_kind(tmp_path):
    """GENJUDGE_TEST_PROCESS_LOG's records (tests/job_probe/sitecustomize.py): one per process."""
    records = [
        {"argv": ["/v/lib/python3.11/site-packages/snakemake/__main__.py"], "cpu_s": 1.5},
        {"argv": ["/v/lib/python3.11/site-packages/snakemake/__main__.py"], "dry_run": True, "cpu_s": 1.25},
        {"argv": ["/v/lib/python3.11/site-packages/snakemake/__main__.py"], "cluster_job": True, "cpu_s": 2.0},
        {"argv": ["/w/.snakemake/scripts/tmpab12cd.generate.py"], "torch": True, "cpu_s": 5.0},
        {"argv": ["/w/.snakemake/scripts/tmpzz99.generate.py"], "torch": True, "cpu_s": 6.0},
        {"argv": ["/w/.snakemake/scripts/tmp_x.merge.py"], "cpu_s": 0.5},
        {"argv": ["-c"], "pytest_worker": True, "torch": True, "cpu_s": 40.0},
        {"argv": ["/v/lib/python3.11/site-packages/vllm/entrypoints/openai/api_server.py"], "cpu_s": 12.0},
    ]
    for i, rec in enumerate(records):
        (tmp_path / f"{i}.json").write_text(json.dumps(rec))
    (tmp_path / "cut.json").write_text('{"argv": ')  # a process killed while writing
    kinds = budget.read_processes(tmp_path)
    assert {kind: sorted(cpu) for kind, cpu in kinds.items()} == {
        "snakemake: run": [1.5],
        "snakemake: dry run": [1.25],
        "snakemake: inside a SLURM job": [2.0],
        "job: generate (imports torch)": [5.0, 6.0],
        "job: merge": [0.5],
        "pytest worker (the tests' own work)": [40.0],
        "vLLM OpenAI server": [12.0],
    }
    table = budget.process_table(kinds)
    assert "| job: generate (imports torch) | 2 | 11 | 5.50 | 16% |" in table
    assert table.splitlines()[2].startswith("| pytest worker")  # costliest first
    assert "| **total** | 8 | 68 | | |" in table
    assert budget.main([str(tmp_path), "--processes"]) == 0
    assert budget.main([str(tmp_path / "none"), "--processes"]) == 2
