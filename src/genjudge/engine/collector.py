"""The cyclic garbage collector, paused while a model job (or a plan) starts.

torch's and transformers' imports and a model's loading allocate hundreds of thousands of
long-lived objects, and the collector's passes over them cost about 0.7 CPU-s per job (importing
torch and a transformers model class: 5.5 CPU-s with it, 4.8 without, medians of 5). Nothing of it is garbage worth collecting, so a job pauses
the collector first thing and resumes it once its model is loaded, before anything is computed.
Imports nothing: a job calls it before its first heavy import."""

import gc


def pause() -> None:
    gc.disable()


def resume() -> None:
    """Collect what start-up left behind (cycles that may hold memory the batches need) and resume."""
    if not gc.isenabled():
        gc.enable()
        gc.collect()
