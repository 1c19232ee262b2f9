"""genjudge.store.job_log.end in fresh interpreters: a finished job leaves through os._exit with its
status and its output flushed; where something may still need the interpreter's shutdown, it returns."""

import subprocess
import sys
import textwrap

import pytest

JOB = textwrap.dedent(
    """
    import atexit, sys, threading, subprocess
    from genjudge.store.job_log import end

    atexit.register(lambda: print("atexit ran", flush=True))
    sys.stdout.write("written, not flushed")  # a pipe: block-buffered
    case = sys.argv[1]
    # The child and the thread run until this process lets them go, however slow the machine.
    if case == "child":  # it ends when this process's end closes the pipe
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    elif case == "thread":
        go = threading.Event()
        threading.Thread(target=go.wait).start()
    elif case == "daemon":
        threading.Thread(target=__import__("time").sleep, args=(60,), daemon=True).start()
    elif case == "reaped":
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    elif case == "c-library":
        import ctypes

        ctypes.CDLL(None).printf(b" / from C")  # C's own stdout buffer, not Python's
    end(3)
    if case == "thread":
        go.set()
    print(" / returned", end="")
    sys.exit(4)
    """
)


def run(case, **env):
    import os

    environ = {k: v for k, v in os.environ.items() if k not in ("GENJUDGE_FULL_EXIT", "PYTHONUNBUFFERED")}
    return subprocess.run(
        [sys.executable, "-c", JOB, case], capture_output=True, text=True, timeout=60, env={**environ, **env}
    )


@pytest.mark.parametrize("case", ["plain", "daemon", "reaped", "c-library"])
def test_a_finished_job_leaves_with_its_status_and_its_output(case):
    proc = run(case)
    # os._exit: the buffered output flushed first (Python's, then C's); atexit handlers and the
    # interpreter's shutdown skipped
    out = "written, not flushed" + (" / from C" if case == "c-library" else "")
    assert (proc.returncode, proc.stdout) == (3, out), proc.stderr[-2000:]


def test_output_that_cannot_be_written_fails_the_job_as_the_interpreter_would():
    import os

    job = "import sys; from genjudge.store.job_log import end; print('x' * 100); end(0)"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "GENJUDGE_FULL_EXIT")}
    with open("/dev/full", "w") as full:  # the print is buffered; the flush in end() meets the full disk
        proc = subprocess.run([sys.executable, "-c", job], stdout=full, stderr=subprocess.PIPE, timeout=60, env=env)
    assert proc.returncode == 120, proc.stderr[-2000:]


@pytest.mark.parametrize("case", ["child", "thread"])
def test_a_job_with_something_still_running_shuts_down_as_usual(case):
    proc = run(case)
    assert (proc.returncode, proc.stdout) == (4, "written, not flushed / returnedatexit ran\n"), proc.stderr[-2000:]


def test_full_exit_asks_for_the_interpreters_shutdown():
    proc = run("plain", GENJUDGE_FULL_EXIT="1")
    assert (proc.returncode, proc.stdout) == (4, "written, not flushed / returnedatexit ran\n"), proc.stderr[-2000:]


def test_under_a_tracer_the_job_shuts_down_as_usual():
    job = "import sys; sys.settrace(lambda *a: None); from genjudge.store.job_log import end; end(3); sys.exit(4)"
    proc = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr[-2000:]


def test_the_genjudge_command_leaves_the_same_way_with_its_status_and_output(tmp_path):
    command = (
        "import atexit, sys; atexit.register(lambda: print('atexit ran')); "
        f"sys.argv = ['genjudge', 'summary', {str(tmp_path)!r}]; "
        "from genjudge.cli import command; sys.exit(command())"
    )
    proc = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    # the command's own status and message, then os._exit: the handler registered before it never ran
    assert proc.returncode == 1 and "summary.json not found" in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == "", proc.stdout
