"""A judge job as one torchrun group over its leased GPUs (`judge.parallel: tensor`).

The job script holds the GPU lease and starts `python -m torch.distributed.run
--standalone --nproc-per-node N -m genjudge.stages.tensor_judge JOB` with the lease's
CUDA_VISIBLE_DEVICES; each rank runs run_judge on every item, rank 0 writes. The
group's output (every rank's) goes to the job's log. The group dies with the job:
torchrun gets SIGTERM when the job process dies, and stops its ranks; a job told to stop
(SIGINT, SIGTERM) tells torchrun so and waits STOP_SECONDS for the group before it kills
what is left; and each rank dies with torchrun (torchrun starts each in a session of its
own, so no signal to torchrun's group reaches them), so that no rank outlives its job to
write outputs a later run would take as done.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

log = logging.getLogger(__name__)

STOP_SECONDS = 3.0  # a stopped job's wait for torchrun to stop its ranks (within the job's own grace)


def _die_with_parent(sig: int = signal.SIGTERM) -> None:
    """`sig` to this process when the one that started it dies (Linux's PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)
    except OSError:
        pass


def _stop_group(proc: subprocess.Popen, sig: int) -> None:
    """Tell torchrun to stop (it passes `sig` to its ranks), and kill it and every rank still there
    STOP_SECONDS later."""
    import psutil

    try:
        group = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.Error:
        group = []
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass
    _, alive = psutil.wait_procs(group, timeout=STOP_SECONDS)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(alive, timeout=STOP_SECONDS)
    proc.wait()


def launch(judge_job, lease, log_stream, n: int) -> None:
    """Run run_judge(judge_job) as a torchrun group of `n` ranks; returns when rank 0 has written the
    outputs, raises when the group fails."""
    import genjudge

    job = {
        "threads": max(1, judge_job.threads // n),
        "lease": {"source": lease.source, "devices": list(lease.devices), "waited_seconds": lease.waited_seconds},
        "job": judge_job,
    }
    with tempfile.TemporaryDirectory(prefix="genjudge-tp-") as tmp:
        path = Path(tmp) / "job.pickle"
        path.write_bytes(pickle.dumps(job))
        env = dict(os.environ)
        src = str(Path(genjudge.__file__).resolve().parents[1])  # the ranks import this genjudge
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        env["GENJUDGE_TENSOR_PARALLEL"] = "1"
        env["OMP_NUM_THREADS"] = str(job["threads"])
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={n}",
            "-m",
            "genjudge.stages.tensor_judge",
            str(path),
        ]
        log.info("tensor-parallel judge: %s (CUDA_VISIBLE_DEVICES=%s)", " ".join(cmd), env.get("CUDA_VISIBLE_DEVICES"))
        log_stream.flush()
        # subprocess.run would SIGKILL torchrun on a KeyboardInterrupt, orphaning its ranks.
        proc = subprocess.Popen(cmd, env=env, stdout=log_stream, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        try:
            rc = proc.wait()
        except BaseException:
            from genjudge.cluster import interrupt

            _stop_group(proc, interrupt.stopped() or signal.SIGTERM)
            raise
    if rc != 0:
        raise RuntimeError(
            f"the tensor-parallel judge group of {n} ranks failed (exit {rc}); its ranks' output is above"
        )


def main(path: str) -> int:
    """One rank of the group."""
    parent = os.getppid()
    _die_with_parent(signal.SIGKILL)  # torchrun gone (SIGKILLed, say): so is this rank, before it writes
    if os.getppid() != parent:  # it died before the line above
        return 1
    from genjudge.engine import collector

    collector.pause()  # until the model is loaded (genjudge.engine.collector)
    from genjudge.config import import_plugins
    from genjudge.engine import tensor_parallel
    from genjudge.engine.threads import set_threads
    from genjudge.errors import InputError
    from genjudge.stages.judge import run_judge

    job = pickle.loads(Path(path).read_bytes())
    backend = tensor_parallel.init()
    rank = tensor_parallel.rank()
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [rank {rank}] %(name)s: %(message)s"))
    logging.getLogger().handlers[:] = [handler]
    logging.getLogger().setLevel(logging.INFO if rank == 0 else logging.WARNING)
    log.info("rank %d of %d, backend %s", rank, tensor_parallel.world_size(), backend)
    import_plugins(job["job"].plugins)
    set_threads(job["threads"])
    stream = sys.stdout if rank == 0 else open(os.devnull, "w")  # noqa: SIM115 - one progress bar: rank 0's
    try:
        run_judge(job["job"], SimpleNamespace(**job["lease"]), stream, parallel="tensor")
        tensor_parallel.finish()
    except InputError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    from genjudge.store.job_log import end

    status = main(sys.argv[1])
    end(status)  # each rank without the interpreter's shutdown, the group finished
    sys.exit(status)
