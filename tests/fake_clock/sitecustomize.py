"""A clock some days ahead, for the Python processes of a test run (the snakemake command and its jobs).

Put this directory on PYTHONPATH and set FAKE_CLOCK_DAYS_AHEAD=N: Python imports this file at start-up,
and the modules that read today's date for a prompt see `datetime.now()` N days ahead: transformers'
chat-template `strftime_now` (transformers/utils/chat_template_utils.py) and genjudge.store.chat_date.
Only their module-level name `datetime` is replaced, as each is imported, so nothing else's clock
(file times, timeouts, Snakemake's bookkeeping) moves.
"""

import datetime as _dt
import importlib.abc
import os
import sys

DAYS = float(os.environ.get("FAKE_CLOCK_DAYS_AHEAD", "0"))
MODULES = {"transformers.utils.chat_template_utils", "genjudge.store.chat_date"}


class _Ahead(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _dt.datetime.now(tz) + _dt.timedelta(days=DAYS)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.datetime = _Ahead

        spec.loader.exec_module = exec_module
        return spec


if DAYS:
    sys.meta_path.insert(0, _Finder())
