"""Stopping when asked: a Ctrl-C or `kill -INT` stops every running job within seconds.

Snakemake's local executor answers SIGINT ("Terminating processes on user request") by waiting for the
running jobs to finish: a terminal's Ctrl-C reaches them (they share its process group), `kill -INT` on
the snakemake process alone does not, and a job's Python may swallow the KeyboardInterrupt where it
lands (in a destructor: "Exception ignored in ... __del__"). So:

- the workflow's process forwards SIGINT to every process below it, then goes on as Snakemake does
  (`forward_to_jobs`, installed by the Snakefile);
- SIGTERM to the snakemake process alone (`kill PID`) is forwarded the same way (`forward_term_to_jobs`,
  installed once Snakemake's scheduler has put in its own handler, which on SIGTERM only stops
  scheduling and waits for the running jobs, however long they run); cluster jobs are not its children
  and run on;
- a job takes its first SIGINT or SIGTERM as an order to stop (`stop_when_asked`, installed by its
  job log): a KeyboardInterrupt, raised again a moment later where the signal landed in a destructor
  (which would drop it), and, should cleanup hang, an exit GRACE_SECONDS later whatever the job is
  doing; once it is raised further signals are ignored, so that the forwarded copy of a terminal's
  Ctrl-C does not interrupt the job's own cleanup.

What a job stored is kept: the item store appends records before it links them (store.item_store), so
a stop at any point leaves every linked record whole, and the rerun resumes from them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

GRACE_SECONDS = 5.0  # after its first signal a job exits by then, whatever it is doing
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal, as a shell reports it

RETRY_SECONDS = 0.05  # a signal that landed in a destructor is sent again this much later
_asked: list[tuple[int, float]] = []  # (signal, monotonic time) of the first stop order this process got
_raised: list[bool] = []  # the KeyboardInterrupt was raised (outside a destructor)


def _in_destructor(frame) -> bool:
    """Whether the signal landed inside a `__del__` (an exception raised there is printed and dropped)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def forward_to_jobs() -> None:
    """In the snakemake process: on SIGINT, send SIGINT to every process below this one, then raise
    KeyboardInterrupt as Python's default handler does (Snakemake then cancels the run). Nothing outside
    the main thread, where signals cannot be handled."""

    def interrupt(previous):
        raise KeyboardInterrupt

    _forward(signal.SIGINT, interrupt)


def forward_term_to_jobs() -> None:
    """In the snakemake process, after Snakemake's scheduler has installed its SIGTERM handler: on SIGTERM,
    send SIGTERM to every process below this one, then call that handler (or, where there was none, end
    as SIGTERM's default does)."""

    def terminate(previous):
        if previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    _forward(signal.SIGTERM, terminate)


def _forward(signum: int, otherwise) -> None:
    """On `signum`: signal every process below this one, then the handler installed before, or
    `otherwise(previous)` where that was SIG_DFL or SIG_IGN. Only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signum)

    def handler(sig, frame):
        _signal_children(sig)
        if callable(previous):
            previous(sig, frame)
        else:
            otherwise(previous)

    signal.signal(signum, handler)


def _signal_children(signum: int) -> None:
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            child.send_signal(signum)
        except psutil.Error:  # gone already
            continue


def stop_when_asked(log=None) -> None:
    """In a job: the first SIGINT or SIGTERM raises KeyboardInterrupt and arms an exit GRACE_SECONDS
    later; later ones are ignored. `log`: where to say so (the job's log stream)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        if _raised:  # stopping already: the forwarded copy of a Ctrl-C, or a second one
            return
        if not _asked:
            _asked.append((signum, time.monotonic()))
            name = signal.Signals(signum).name
            if log is not None:
                try:
                    print(f"{name}: stopping (items stored so far are kept; the next run resumes from them)", file=log)
                except (OSError, ValueError):
                    pass
            threading.Thread(target=_exit_later, args=(EXIT_STATUS[signum], log), daemon=True).start()
        if _in_destructor(frame):  # Python would print the KeyboardInterrupt and go on: raise it a moment later
            threading.Timer(RETRY_SECONDS, os.kill, (os.getpid(), _asked[0][0])).start()
            return
        _raised.append(True)
        raise KeyboardInterrupt

    for signum in EXIT_STATUS:
        signal.signal(signum, handler)


def _exit_later(status: int, log) -> None:
    time.sleep(GRACE_SECONDS)
    try:
        if log is not None:
            print(f"still running {GRACE_SECONDS:g} s after the stop order: exiting now", file=log, flush=True)
        sys.stderr.flush()
    finally:
        os._exit(status)


def stopped() -> int | None:
    """The signal this process was told to stop by, or None."""
    return _asked[0][0] if _asked else None
