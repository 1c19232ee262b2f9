"""The date a run's chat templates stamp into its prompts, pinned once per run.

Some chat templates (Llama 3.1-3.3, SmolLM3) call transformers' `strftime_now` and write today's date
into every prompt, hence into every item key: past midnight a rerun would resume nothing. A run's
jobs render with one date instead: the config's `chat_date` where set, else the date of the run's
first generation or judge job, written once to `results/<run>/chat_date.json` and read by every
later job and rerun of that run, on any machine that sees its results. The date is local time, as
transformers' own `strftime_now` reads it.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from genjudge.errors import InputError

PIN_FILE = "chat_date.json"


@dataclass(frozen=True)
class Pin:
    date: str  # ISO date, YYYY-MM-DD
    source: str  # where it comes from, in words


def today() -> str:
    return datetime.now().date().isoformat()


def check_configured(value, key: str = "chat_date") -> str | None:
    """The config's date as an ISO string (None: not set); a date that does not exist stops."""
    if value is None:
        return None
    try:
        return date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise InputError(f"{key}: {value!r} is not a date; write it as YYYY-MM-DD, e.g. 2024-11-26") from None


def _read(path: Path) -> str:
    try:
        return date.fromisoformat(json.loads(path.read_text())["date"]).isoformat()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{path}: the run's pinned chat date cannot be read ({exc}); write it back as "
            '{"date": "YYYY-MM-DD"} with the day its prompts were rendered, or set chat_date in the config'
        ) from None


def peek(results_dir, configured=None) -> Pin | None:
    """The run's date without pinning one (planning): None where no job has pinned it yet."""
    configured = check_configured(configured)
    if configured:
        return Pin(configured, "chat_date in the config")
    path = Path(results_dir) / PIN_FILE
    return Pin(_read(path), f"pinned in {path}") if path.exists() else None


def stamped(results_dir, configured, engine: str) -> str | None:
    """The date a model job's chat templates stamp, pinned once per run; None for a model behind an
    endpoint, whose server renders its own template."""
    return None if engine == "openai" else pin(results_dir, configured).date


def pin(results_dir, configured=None) -> Pin:
    """The run's date: the configured one, the one pinned before, or today's, pinned now. Jobs that
    start together agree: the file is linked into place only where none is, and a job that finds one
    reads it."""
    found = peek(results_dir, configured)
    if found is not None:
        return found
    path = Path(results_dir) / PIN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{PIN_FILE}.{os.getpid()}.tmp")
    record = {"date": today(), "pinned_at": time.time(), "hostname": socket.gethostname()}
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    try:
        os.link(tmp, path)  # fails where another job pinned first: its date wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return Pin(_read(path), f"pinned in {path}")
