"""genjudge.engine.collector in a fresh job-like interpreter: imports are frozen, not collected;
garbage made while a model loads is still collected; the exit stays clean."""

import subprocess
import sys
import textwrap

JOB = textwrap.dedent(
    """
    import gc, weakref
    from genjudge.engine import collector

    collector.pause()
    import torch  # torch._dynamo (imported by transformers) imports triton: its bindings report leaks at exit
    import torch._dynamo
    import transformers

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        a.weights = torch.zeros(1000)
        return weakref.ref(a)

    before_load = cycle()  # garbage from start-up, made before the imports were done
    collector.freeze_imports()
    frozen = gc.get_freeze_count()
    during_load = cycle()  # garbage a model's loading leaves behind
    collector.resume()
    print(frozen > 100_000, before_load() is not None, during_load() is None, gc.isenabled())
    """
)


def test_a_job_freezes_its_imports_collects_the_loading_and_exits_clean():
    proc = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # hundreds of thousands of objects frozen, start-up's own cycle frozen with them (never walked),
    # the loading's cycle collected, the collector running again
    assert proc.stdout.split() == ["True", "True", "True", "True"], proc.stdout
    assert "leaked" not in proc.stderr, proc.stderr[-3000:]  # unfrozen at exit: freed as before


def test_resume_without_a_model_freezes_everything_so_far():
    job = (
        "import gc; from genjudge.engine import collector; collector.pause(); import json; "
        "collector.resume(); print(gc.get_freeze_count() > 0, gc.isenabled())"
    )
    proc = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "True"], proc.stdout + proc.stderr
