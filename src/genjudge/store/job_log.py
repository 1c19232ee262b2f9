"""Job logging for the workflow's scripts: everything into the rule's `log:` file."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from genjudge.cluster import interrupt
from genjudge.errors import InputError

ATTEMPTS = ".attempts"  # `<log>.attempts/<k>.log`: every attempt's log, kept across reruns


def attempt_log(path: str) -> tuple[Path, object]:
    """The next attempt's log file beside `path` (`<path>.attempts/<k>.log`, k one more than the last),
    created and open for writing, with `path` a hard link to it: Snakemake removes a job's log before it
    runs it again, which takes only that name, so each attempt's log survives the reruns. Where the file
    system has no hard links, `path` itself (appended)."""
    folder = Path(f"{path}{ATTEMPTS}")
    folder.mkdir(parents=True, exist_ok=True)
    k = max((int(p.stem) for p in folder.glob("*.log") if p.stem.isdigit()), default=0)
    while True:
        k += 1
        try:
            fd = os.open(folder / f"{k}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            continue
    stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
    try:
        if os.path.lexists(path):
            os.unlink(path)
        os.link(folder / f"{k}.log", path)
    except OSError:
        stream.close()
        (folder / f"{k}.log").unlink()
        return Path(path), open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - the caller closes it
    return folder / f"{k}.log", stream


@contextmanager
def job_log(path: str, name: str):
    """Send logging, warnings and progress bars to `path`; yield the open stream.

    A failure is logged in full to the file and reported on stderr in one line
    for an InputError (the message names the file and field) so that Snakemake's
    console shows what is wrong without a traceback to dig through. Each attempt
    writes a numbered log of its own (`attempt_log`), and the first SIGINT or
    SIGTERM stops the job within seconds (cluster.interrupt), said in one line.
    """
    attempt, stream = attempt_log(path)
    interrupt.stop_when_asked(stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    old_stderr = sys.stderr
    sys.stderr = stream  # transformers/torch warnings and tqdm default to stderr
    logging.getLogger(name).info(
        "start on %s (pid %d; this attempt's log: %s)", socket.gethostname(), os.getpid(), attempt
    )
    t0 = time.monotonic()
    try:
        yield stream
    except InputError as exc:
        logging.getLogger(name).error("%s", exc)
        sys.stderr = old_stderr
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        signum = interrupt.stopped() or signal.SIGINT
        logging.getLogger(name).warning(
            "stopped by %s after %.1fs; what was stored is kept", signal.Signals(signum).name, time.monotonic() - t0
        )
        sys.stderr = old_stderr
        print(f"{name}: stopped by {signal.Signals(signum).name} [log: {attempt}]", file=sys.stderr, flush=True)
        stream.close()
        # Now, not through the interpreter's shutdown: torch's finalisers took up to 8 s more here. What the
        # job stored is on disk already (the item store syncs each batch before it links it), and the GPU
        # leases are flocks the kernel drops.
        os._exit(interrupt.EXIT_STATUS[signum])
    except BaseException:
        logging.getLogger(name).exception("failed after %.1fs", time.monotonic() - t0)
        raise
    else:
        logging.getLogger(name).info("done in %.1fs", time.monotonic() - t0)
    finally:
        sys.stderr = old_stderr
        root.handlers[:] = []
        stream.close()


FULL_EXIT = "GENJUDGE_FULL_EXIT"  # =1: a job's interpreter shuts down as usual (coverage, profilers)


def end(status: object = 0) -> None:
    """End a job process whose work is done: its outputs written (atomically, synced), its log
    closed, its leases released. The standard streams are flushed and the process leaves through
    os._exit, skipping the interpreter's shutdown: torch's and transformers' thousands of modules
    torn down, a last collection over every object, torch's operator-library finalisers and a table
    of compile times logged to no handler. That shutdown took 2.5 CPU-s of a model job's 11.0
    (generate job, median of 5 alternating pairs, 0.79 [0.75-0.82] of the time; merge 0.18 of 1.19).

    Skipping it also skips atexit handlers, so it returns instead, and the interpreter shuts down as
    usual, wherever something may still need them: a child process or a non-daemon thread still
    running (vLLM's engine core, a torchrun group), a tracer or profiler attached (coverage), or
    GENJUDGE_FULL_EXIT=1 set. `status` as sys.exit takes it: None is 0, an int itself, anything else 1."""
    status = 0 if status is None else status if isinstance(status, int) else 1
    if os.environ.get(FULL_EXIT) == "1" or _observed():
        return
    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        import psutil

        if any(c.status() != psutil.STATUS_ZOMBIE for c in psutil.Process().children()):
            return
    except Exception:  # noqa: BLE001 - no psutil, or no /proc: the usual shutdown, which is always safe
        return
    logging.shutdown()
    for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if s}.values():
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left, or a stream closed already
            pass
        except OSError:  # what the interpreter does when its last flush fails (a full disk)
            status = status or 120
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)  # C and C++ libraries' own buffered output (gloo's, NCCL's)
    except (OSError, AttributeError):
        pass
    os._exit(status)


def _observed() -> bool:
    """A tracer or profiler is attached (coverage, cProfile): what it writes at exit is wanted."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's and cProfile's newer hooks
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))
