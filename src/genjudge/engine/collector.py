"""The cyclic garbage collector, paused while a model job (or a plan) starts.

torch's and transformers' imports and a model's loading allocate hundreds of thousands of
long-lived objects, and the collector's passes over them cost about 0.7 CPU-s per job (importing
torch and a transformers model class: 5.5 CPU-s with it, 4.8 without, medians of 5). Nothing of it is garbage worth collecting, so a job pauses
the collector first thing and resumes it once its model is loaded, before anything is computed.

What the imports allocated is then frozen (gc.freeze) rather than collected: one full pass over it
cost 0.49-0.63 CPU-s a job (3 runs), the freeze nothing; a job's start-up with the demo generator
took 10.7 CPU-s against 11.8 (median of 9 alternating pairs, ratio 1.09 [1.00-1.16] on a slow
2-core machine). Only what loading the model allocated is collected, since a cycle there may hold
memory the batches need. The frozen objects are unfrozen at exit, so that the interpreter's last
collection frees them as it did before.
Imports nothing heavy: a job calls it before its first heavy import."""

import atexit
import gc


def pause() -> None:
    gc.disable()


def freeze_imports() -> None:
    """Everything allocated so far lives as long as the job (modules, classes): out of the collector's
    sight from now on. Called once imports are done, before a model is loaded."""
    if not gc.get_freeze_count():
        atexit.register(gc.unfreeze)
    gc.freeze()


def resume() -> None:
    """Collect what start-up left behind since the imports (cycles that may hold memory the batches
    need) and resume."""
    if not gc.isenabled():
        if not gc.get_freeze_count():  # no model was loaded since: all of it is imports
            freeze_imports()
        gc.enable()
        gc.collect()
