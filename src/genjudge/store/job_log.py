"""Job logging for the workflow's scripts: everything into the rule's `log:` file."""

from __future__ import annotations

import logging
import socket
import sys
import time
from contextlib import contextmanager

from genjudge.errors import InputError


@contextmanager
def job_log(path: str, name: str):
    """Send logging, warnings and progress bars to `path`; yield the open stream.

    A failure is logged in full to the file and reported on stderr in one line
    for an InputError (the message names the file and field) so that Snakemake's
    console shows what is wrong without a traceback to dig through.
    """
    stream = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed when the context exits
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    old_stderr = sys.stderr
    sys.stderr = stream  # transformers/torch warnings and tqdm default to stderr
    logging.getLogger(name).info("start on %s", socket.gethostname())
    t0 = time.monotonic()
    try:
        yield stream
    except InputError as exc:
        logging.getLogger(name).error("%s", exc)
        sys.stderr = old_stderr
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except BaseException:
        logging.getLogger(name).exception("failed after %.1fs", time.monotonic() - t0)
        raise
    else:
        logging.getLogger(name).info("done in %.1fs", time.monotonic() - t0)
    finally:
        sys.stderr = old_stderr
        root.handlers[:] = []
        stream.close()
