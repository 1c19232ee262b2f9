"""Shared helpers: temporary copies of the workflow and the real snakemake command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

ROOT = Path(__file__).resolve().parents[1]
# `make test` runs more workers than cores, each starting Snakemake jobs: more threads than cores. An
# OpenMP thread of torch's (libgomp) spins while it waits for the others; descheduled, they make every
# parallel region wait for a time slice. Measured on 2 busy cores: 44 prompts of the demo generator on
# 2 threads took 14-22 CPU-s (90-106 s) spinning, 0.2-0.3 CPU-s (0.5-0.9 s) with passive waiting;
# tests/test_batching.py 47 CPU-s against 11. Set before torch loads, for this process and every
# process it starts (the jobs compute the same; only how idle threads wait differs).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# pytest keeps each test module's rewritten asserts in a pyc beside it (tests/__pycache__), unless the
# interpreter writes no bytecode (PYTHONDONTWRITEBYTECODE, set on some machines). Then every pytest
# process rewrites every module it collects, each run: collecting `make test-fast`'s tests took 16.7
# CPU-s a worker, 11.3 with the pycs kept (nproc + 1 workers in `make test`). pytest's own processes
# write bytecode (for what they import after this file, which itself is rewritten each time); the
# processes the tests start keep the variable (`make test` compiles the project's modules beforehand).
sys.dont_write_bytecode = False
WORKFLOW_PARTS = ["Snakefile", "rules", "scripts", "config", "profiles", "slurm", "report"]


PROBE_DIR = ROOT / "tests" / "job_probe"


def _with_probe(pythonpath: str | None) -> str | None:
    """PYTHONPATH with tests/job_probe first where GENJUDGE_TEST_PROCESS_LOG is set: every Python
    process the suite starts then records what it cost (tests/job_probe/sitecustomize.py)."""
    if not os.environ.get("GENJUDGE_TEST_PROCESS_LOG"):
        return pythonpath
    parts = [p for p in pythonpath.split(os.pathsep) if p != str(PROBE_DIR)] if pythonpath else []
    return os.pathsep.join([str(PROBE_DIR), *parts])


def pytest_configure(config):
    """The directories of the run's shared model servers (tests/endpoints.py shared_servers) and of its
    machine cache, made by the pytest process that starts the workers, which inherit them. With
    GENJUDGE_TEST_PROCESS_LOG=dir, every process started from here on records its CPU there
    (`tests/budget.py --processes dir`)."""
    if hasattr(config, "workerinput"):  # a worker: it inherits what the starting process made
        return
    if log := os.environ.get("GENJUDGE_TEST_PROCESS_LOG"):
        log = os.path.abspath(log)  # the processes write from their own working directories
        os.makedirs(log, exist_ok=True)
        if any(Path(log).glob("*.json")):
            raise pytest.UsageError(
                f"GENJUDGE_TEST_PROCESS_LOG={log} holds an earlier run's records: give an empty directory"
            )
        os.environ["GENJUDGE_TEST_PROCESS_LOG"] = log
        os.environ["PYTHONPATH"] = _with_probe(os.environ.get("PYTHONPATH"))
    if "GENJUDGE_TEST_SERVER_DIR" not in os.environ:
        os.environ["GENJUDGE_TEST_SERVER_DIR"] = tempfile.mkdtemp(prefix="genjudge-test-servers-")
        config._genjudge_servers = os.environ["GENJUDGE_TEST_SERVER_DIR"]
    # The run's own machine cache (the CPU figures, the model facts: genjudge.engine.devices.machine_cache_dir),
    # shared by the workers and every process they start. CPU figures measured while the suite loads the
    # cores would otherwise be what the user's later plans read, and a warm machine would skip the paths a
    # fresh one (CI) takes. GENJUDGE_MACHINE_CACHE set beforehand is used as it is.
    if "GENJUDGE_MACHINE_CACHE" not in os.environ:
        os.environ["GENJUDGE_MACHINE_CACHE"] = tempfile.mkdtemp(prefix="genjudge-test-machine-")
        os.environ["GENJUDGE_TEST_MACHINE_CACHE"] = os.environ["GENJUDGE_MACHINE_CACHE"]  # made here, not given
        config._genjudge_machine_cache = os.environ["GENJUDGE_MACHINE_CACHE"]


def pytest_unconfigure(config):
    if cache := getattr(config, "_genjudge_machine_cache", None):
        shutil.rmtree(cache, ignore_errors=True)
        del os.environ["GENJUDGE_MACHINE_CACHE"], os.environ["GENJUDGE_TEST_MACHINE_CACHE"]
    root = getattr(config, "_genjudge_servers", None)
    if root:
        from endpoints import stop_shared_servers

        stop_shared_servers(Path(root))
        shutil.rmtree(root, ignore_errors=True)
        del os.environ["GENJUDGE_TEST_SERVER_DIR"]


def _server_dir() -> Path | None:
    root = os.environ.get("GENJUDGE_TEST_SERVER_DIR")
    return Path(root) if root and Path(root).is_dir() else None


def pytest_collection_finish(session):
    """The tests that may ask for the run's shared vLLM servers (marked `servers`), once collected and
    selected: the servers stop when the last of them ends (tests/endpoints.py)."""
    if root := _server_dir():
        from endpoints import register_users

        register_users(root, [i.nodeid for i in session.items if i.get_closest_marker("servers")])


_REAPED_CPU = [0.0]  # CPU-s of shared servers a test's end stopped and reaped: not in its CPU log line


def pytest_runtest_logfinish(nodeid, location):
    if root := _server_dir():
        from endpoints import user_finished

        _REAPED_CPU[0] = user_finished(root, nodeid) or 0.0


def pytest_collection_modifyitems(config, items):
    """The SLURM modules first (they wait on the scheduler more than they compute), then the others,
    costliest first by tests/durations.json (a module it does not know yet first of all); each
    module's tests kept together and in their order. `make test` hands whole modules to its
    pytest-xdist workers (--dist loadscope), and hands a worker its next module while it still runs
    two tests: a long module handed out late would keep one worker busy while the others have nothing
    left to do. Longest first, the short modules fill the gaps at the end."""
    slurm: set[str] = set()
    for item in items:
        if item.get_closest_marker("slurm"):
            slurm.add(item.nodeid.split("::")[0])
    cost = module_costs()
    items.sort(key=lambda item: ((m := item.nodeid.split("::")[0]) not in slurm, -cost.get(m, float("inf")), m))


def module_costs() -> dict[str, float]:
    """Each module's CPU seconds in the run tests/durations.json records."""
    budget = json.loads((ROOT / "tests" / "durations.json").read_text())
    return {module: entry["cpu_s"] for module, entry in budget["modules"].items()}


def planned_jobs(proc: subprocess.CompletedProcess) -> dict:
    """The jobs a snakemake run planned, by rule: the "Job stats" table it prints before running any
    job (a dry run prints the same)."""
    table = re.search(r"^Job stats:\n.*?^total\s+\d+$", proc.stdout + proc.stderr, re.M | re.S)
    assert table, proc.stdout[-3000:] + proc.stderr[-3000:]
    return dict(re.findall(r"^(\w+)\s+(\d+)$", table[0], re.M))


def copy_workflow(dest: Path) -> None:
    for part in WORKFLOW_PARTS:
        src = ROOT / part
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / part)
        elif src.is_dir():
            shutil.copytree(src, dest / part)
        else:
            shutil.copy2(src, dest / part)


def clean_env(**extra) -> dict:
    env = {
        k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "GENJUDGE_LOCK_DIR")
    }
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: v for k, v in extra.items() if v is not None})
    if extra.get("PYTHONPATH") is not None:
        env["PYTHONPATH"] = _with_probe(env["PYTHONPATH"])
    return env


def wait_until(cond, what: str, proc=None, timeout: float = 300) -> None:
    """Poll `cond` until it holds: what a fixed pause would guess at, which a loaded machine can miss.
    Fails naming `what` when `proc` ends first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended before {what}")
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def genjudge_cli(*args, cwd=None, env=None, check=False) -> subprocess.CompletedProcess:
    """`genjudge ARGS` in this process (genjudge.cli.main, what the command runs): its exit status and
    output as subprocess.run(capture_output=True, text=True) gives them. A process of its own would
    import torch and transformers again, about 10 of the 11 CPU-s a `genjudge plan` takes; the command's
    own process (exit status, streams, a closed pipe) is tests/test_cli.py's. `cwd` and `env` hold for
    the call; what the command may change of this process (its directory with --directory, the
    environment, the paused garbage collector) is put back."""
    import contextlib
    import gc
    import io

    from genjudge.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    cwd_before, env_before, collecting = os.getcwd(), dict(os.environ), gc.isenabled()
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(cwd_before)
        os.environ.clear()
        os.environ.update(env_before)
        if collecting:
            gc.enable()
    proc = subprocess.CompletedProcess(["genjudge", *argv], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(
            f"genjudge {' '.join(argv)} failed ({code}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def snakemake(workdir, *args, env=None, check=True, timeout=900) -> subprocess.CompletedProcess:
    """Run the real `snakemake` command line (this interpreter's) in `workdir`."""
    cmd = [sys.executable, "-m", "snakemake", *map(str, args)]
    proc = subprocess.run(cmd, cwd=workdir, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(map(str, args))} failed ({proc.returncode}):\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


class Workflow:
    """A temporary copy of the workflow with the demo models already built."""

    def __init__(self, path: Path, lock_dir: Path):
        self.path = path
        self.lock_dir = lock_dir

    def write_config(self, name="test.yaml", **overrides) -> Path:
        cfg = yaml.safe_load((self.path / "config" / "demo.yaml").read_text())
        update_config(cfg, overrides)
        cfg.setdefault("lock_dir", str(self.lock_dir))
        if cfg.get("lock_dir") is None:
            cfg["lock_dir"] = str(self.lock_dir)
        path = self.path / "config" / name
        path.write_text(yaml.safe_dump(cfg))
        return path

    def run(self, *args, env=None, check=True, timeout=900):
        return snakemake(self.path, *args, env=env, check=check, timeout=timeout)

    def results(self, run="demo") -> Path:
        return self.path / "results" / run

    def metas(self, run="demo") -> list[dict]:
        metas = [json.loads(p.read_text()) for p in (self.results(run) / "generations").glob("*/*/*.meta.json")]
        return sorted(metas, key=lambda m: (m["generator"], m["dataset"], m["shard"]))

    def copy(self, root: Path) -> Workflow:
        """A copy under `root` (its runs, logs, caches and Snakemake's records, mtimes kept: Snakemake
        finds the finished jobs finished), for a test that changes a run a module shares."""
        shutil.copytree(self.path, root / "wf", symlinks=True)
        return Workflow(root / "wf", self.lock_dir)


@pytest.fixture(scope="session")
def built_models(tmp_path_factory) -> Path:
    """The demo models: the committed ones, or trained once by the workflow's own rule."""
    if all((ROOT / "models" / m / "model.safetensors").exists() for m in ("demo-generator", "demo-judge")):
        return ROOT / "models"
    base = tmp_path_factory.mktemp("models_base")
    copy_workflow(base)
    snakemake(base, "--cores", "2", "models/demo-generator", "models/demo-judge")
    return base / "models"


def new_workflow(root: Path, built_models: Path) -> Workflow:
    """A fresh copy of the workflow under `root`, with the demo models (module-scoped runs use it)."""
    wd = root / "wf"
    wd.mkdir()
    copy_workflow(wd)
    shutil.copytree(built_models, wd / "models")
    lock_dir = root / "locks"
    lock_dir.mkdir()
    return Workflow(wd, lock_dir)


@pytest.fixture
def workflow(tmp_path, built_models) -> Workflow:
    return new_workflow(tmp_path, built_models)


def generate_shard(tmp_path: Path, spec, name: str = "out", store: str = "store", shard_path=None):
    """Run the generate stage on shard 0 (`tmp_path/0.jsonl`) on CPU, outside Snakemake; (rows, meta)."""
    import io

    import pandas as pd
    from judges import generate_with

    from genjudge.cluster.gpu_lease import Lease

    meta = generate_with(
        shard=0,
        shard_path=shard_path or tmp_path / "0.jsonl",
        out_path=tmp_path / f"{name}.parquet",
        meta_path=tmp_path / f"{name}.meta.json",
        spec=spec,
        store_dir=tmp_path / store,
        run="t",
        lease=Lease([], "none"),
        log_stream=io.StringIO(),
    )
    return pd.read_parquet(tmp_path / f"{name}.parquet"), meta


# GENJUDGE_TEST_CPU_LOG=file appends one line per test: CPU seconds (the test process's own and its
# finished children's: snakemake and the jobs it ran), wall seconds, id, snakemake invocations (dry
# runs among them), the jobs those runs finished, the jobs by rule, the test's marks and whether it
# failed. A test's cost includes the set-up and tear-down of the module- and session-scoped fixtures
# it was the first or last to use, so the lines of a module add up to what the module costs. The jobs
# SLURM ran are in it too: no test process waits for them, so the CPU of what has ended outside the
# test's process tree is added from EXTERNAL_CPU. tests/budget.py sums the lines by module.
_SNAKEMAKE_RUNS: list[tuple[str, bool]] = []
# Callables giving the CPU-s that processes no test process waits for have spent so far (the SLURM test
# cluster's: tests/slurm/reaper.py); one stays here until its processes' parent has been waited for.
EXTERNAL_CPU: list = []


def _note_snakemake(args, cwd) -> None:
    if isinstance(args, (str, bytes, os.PathLike)):
        return
    argv = [str(a) for a in args]
    is_snakemake = any(Path(a).name == "snakemake" for a in argv[:1]) or any(
        a == "-m" and b == "snakemake" for a, b in zip(argv, argv[1:])
    )
    if is_snakemake:
        dry = any(a in ("-n", "--dry-run", "--dryrun") for a in argv)
        _SNAKEMAKE_RUNS.append((str(cwd or os.getcwd()), dry))


_COUNTED_LOGS: set[str] = set()  # by name (a timestamp): a copied workflow holds its source's logs


def _finished_jobs(workdirs: set[str], since: float) -> dict[str, int]:
    """Jobs by rule that the snakemake logs written since `since` in `workdirs` say finished."""
    import re

    jobs: dict[str, int] = {}
    for wd in workdirs:
        for log in Path(wd).glob(".snakemake/log/*.snakemake.log"):
            if log.stat().st_mtime < since or log.name in _COUNTED_LOGS:
                continue
            _COUNTED_LOGS.add(log.name)
            for rule in re.findall(r"^Finished jobid: \d+ \(Rule: (\w+)\)", log.read_text(errors="replace"), re.M):
                if rule != "all":
                    jobs[rule] = jobs.get(rule, 0) + 1
    return jobs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _server_dir():  # servers another worker stopped since: waited for here, in no test's line
        from endpoints import reap_stopped_servers

        reap_stopped_servers()
    path = os.environ.get("GENJUDGE_TEST_CPU_LOG")
    if not path:
        yield
        return
    import resource
    import time

    if not getattr(subprocess.Popen, "_genjudge_counted", False):
        popen_init = subprocess.Popen.__init__

        def counted_init(self, args, *a, **kw):
            _note_snakemake(args, kw.get("cwd"))
            popen_init(self, args, *a, **kw)

        subprocess.Popen.__init__ = counted_init
        subprocess.Popen._genjudge_counted = True

    def cpu():
        c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
        return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime + sum(f() for f in EXTERNAL_CPU)

    _SNAKEMAKE_RUNS.clear()
    _REAPED_CPU[0] = 0.0
    c0, t0, since = cpu(), time.monotonic(), time.time() - 1
    yield
    c0 += _REAPED_CPU[0]
    runs = list(_SNAKEMAKE_RUNS)
    jobs = _finished_jobs({wd for wd, _ in runs}, since)
    by_rule = ",".join(f"{r}={n}" for r, n in sorted(jobs.items()))
    marks = ",".join(sorted({m.name for m in item.iter_markers()} & {"workflow", "slurm", "vllm", "bench", "gpu"}))
    failed = any(getattr(item, f"_genjudge_{when}_failed", False) for when in ("setup", "call", "teardown"))
    with open(path, "a") as f:
        f.write(
            f"{cpu() - c0:.1f}\t{time.monotonic() - t0:.1f}\t{item.nodeid}\t{len(runs)}\t"
            f"{sum(dry for _, dry in runs)}\t{sum(jobs.values())}\t{by_rule}\t{marks}\t"
            f"{'failed' if failed else 'ok'}\n"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Notes a failed phase on the item, for the CPU log (a failed test may have stopped early)."""
    outcome = yield
    if outcome.get_result().failed:
        setattr(item, f"_genjudge_{call.when}_failed", True)
