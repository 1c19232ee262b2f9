"""Put first on PYTHONPATH by a test, with GENJUDGE_TEST_JOB_IMPORTS=dir: every Python process of the run
writes, as it exits (through the interpreter's shutdown or os._exit), which heavy libraries it imported and from which genjudge functions (the first
import of each), for tests/test_workflow.py to check the jobs that need no model. Without the variable
it does nothing."""

import atexit
import json
import os
import sys
import traceback

HEAVY = ("torch", "transformers", "accelerate", "bitsandbytes", "vllm")
_OUT = os.environ.get("GENJUDGE_TEST_JOB_IMPORTS")
_FIRST: dict[str, list[str]] = {}


class _Watch:
    """Notes the genjudge functions on the stack when a heavy library is first imported; finds nothing."""

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in HEAVY and top not in _FIRST:
            _FIRST[top] = [f.name for f in traceback.extract_stack() if "/genjudge/" in f.filename]
        return None


def _record(exit="interpreter"):
    heavy = {m: _FIRST.get(m, []) for m in HEAVY if m in sys.modules}
    with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w") as f:
        json.dump({"argv": sys.argv[:1], "heavy": heavy, "exit": exit}, f)


def _exit(status, _os_exit=os._exit):
    _record(exit="os._exit")
    _os_exit(status)


if _OUT:
    sys.meta_path.insert(0, _Watch())
    atexit.register(_record)
    os._exit = _exit  # a job ends through it (genjudge.store.job_log.end), skipping atexit
