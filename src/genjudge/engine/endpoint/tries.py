"""The job's ledger of the tries it sent (`tries/` beside its item store, one file per job): a line
before each try is sent, with its worst case, and a line once its outcome is known and not billed
beyond what the store or `unkept/` records. A try left unsettled (it timed out, its answer was cut
off, the job stopped or was killed while it was in flight) may have been billed: later attempts of
the job count it at its worst case, as this attempt did.

Each line is written through at once (a line-buffered file): a job killed with SIGKILL loses nothing
the kernel was handed.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path


class Tries:
    def __init__(self, path: Path | None):
        """`path` None: nothing is written (the price is unknown, so nothing would be counted)."""
        self.path = path
        self._fh = None
        self._prefix = uuid.uuid4().hex[:8]  # tries of different attempts never share an id
        self._n = 0

    def sent(self, cost: float | None) -> str | None:
        """Before a try is sent: its id, or None where nothing is recorded."""
        if self.path is None or not cost:
            return None
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed by close()
        self._n += 1
        tid = f"{self._prefix}.{self._n}"
        self._fh.write(json.dumps({"try": tid, "at_most_usd": cost}) + "\n")
        return tid

    def settled(self, tid: str | None) -> None:
        """The try's outcome is known and counted elsewhere (stored, unkept) or was not billed."""
        if tid is not None and self._fh is not None:
            self._fh.write(json.dumps({"settled": tid}) + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def unsettled(path: Path) -> tuple[int, float]:
    """(how many, their worst cases in USD) of the tries in `path` that were never settled."""
    if not path.exists():
        return 0, 0.0
    open_tries: dict[str, float] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # cut off by a kill while written: its try was not sent yet
            if "try" in rec:
                open_tries[rec["try"]] = float(rec["at_most_usd"])
            else:
                open_tries.pop(rec.get("settled"), None)
    return len(open_tries), sum(open_tries.values())


def ledger_path(store_directory: str | os.PathLike, writer: str) -> Path:
    return Path(store_directory) / "tries" / f"{writer}.jsonl"
