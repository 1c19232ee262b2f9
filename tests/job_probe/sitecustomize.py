"""Put first on PYTHONPATH by a test or by tests/conftest.py. Each Python process that imports it
writes a record as it exits (through the interpreter's shutdown or os._exit), one file per process:

- with GENJUDGE_TEST_JOB_IMPORTS=dir, which heavy libraries it imported and from which genjudge
  functions (the first import of each), for tests/test_workflow.py to check the jobs that need no
  model;
- with GENJUDGE_TEST_PROCESS_LOG=dir (the whole suite: tests/conftest.py puts this directory on
  every process's path), what the process was, where it ran, its own CPU seconds and whether it
  imported torch, for `tests/budget.py --processes dir`: what the suite's CPU is spent on, by kind
  of process.

Without either variable it does nothing."""

import atexit
import json
import os
import sys
import traceback

HEAVY = ("torch", "transformers", "accelerate", "bitsandbytes", "vllm")
_OUT = os.environ.get("GENJUDGE_TEST_JOB_IMPORTS")
_PROCESSES = os.environ.get("GENJUDGE_TEST_PROCESS_LOG")
_FIRST: dict[str, list[str]] = {}
_DONE = []  # a process leaving through os._exit after atexit ran records once


class _Watch:
    """Notes the genjudge functions on the stack when a heavy library is first imported; finds nothing."""

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in HEAVY and top not in _FIRST:
            _FIRST[top] = [f.name for f in traceback.extract_stack() if "/genjudge/" in f.filename]
        return None


def _record(exit="interpreter"):
    if _DONE:
        return
    _DONE.append(exit)
    if _OUT:
        heavy = {m: _FIRST.get(m, []) for m in HEAVY if m in sys.modules}
        with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w") as f:
            json.dump({"argv": sys.argv[:1], "heavy": heavy, "exit": exit}, f)
    if _PROCESSES:
        import resource
        import time

        own = resource.getrusage(resource.RUSAGE_SELF)
        try:
            cwd = os.getcwd()
        except OSError:  # its working directory was removed under it
            cwd = None
        record = {
            "argv": sys.argv[:1],
            "dry_run": any(a in ("-n", "--dry-run", "--dryrun") for a in sys.argv),
            "cluster_job": "slurm-jobstep" in sys.argv,  # Snakemake inside a SLURM job
            "pytest_worker": "execnet" in sys.modules,
            "cwd": cwd,
            "cpu_s": round(own.ru_utime + own.ru_stime, 3),
            "torch": "torch" in sys.modules,
            "exit": exit,
        }
        try:  # named by pid and time: a pid the kernel hands out again is another process
            with open(os.path.join(_PROCESSES, f"{os.getpid()}-{time.time_ns()}.json"), "x") as f:
                json.dump(record, f)
        except OSError:  # the directory is gone (a process outliving the run): nothing to add to
            pass


def _exit(status, _os_exit=os._exit):
    _record(exit="os._exit")
    _os_exit(status)


if _OUT:
    sys.meta_path.insert(0, _Watch())
if _OUT or _PROCESSES:
    atexit.register(_record)
    os._exit = _exit  # a job ends through it (genjudge.store.job_log.end), skipping atexit


def _chain():
    """A test's own sitecustomize later on the path (tests/fake_clock's) runs too: Python imports only
    the first one it finds, and the suite-wide process log puts this one first."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        other = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(other):
            spec = importlib.util.spec_from_file_location("_sitecustomize_after_probe", other)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


if _PROCESSES:
    _chain()
