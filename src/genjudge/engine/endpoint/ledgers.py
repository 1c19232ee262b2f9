"""What an endpoint job keeps beside its item store across its attempts (`Ledgers`), and the lock that
keeps a second live process of the same job from sending too.

Every path is per writer (one job of the workflow): `probes/` and `unkept/` (what it paid for and did not
store), `tries/` (each try before it is sent), `probes/<writer>.checked.json` (the capability probe it
passed), `budget/<writer>.json` (the budget it stopped at) and `locks/<writer>.lock`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from genjudge.engine.endpoint.cost import Budget
from genjudge.engine.endpoint.tries import ledger_path, unsettled
from genjudge.errors import InputError

log = logging.getLogger("endpoint")

HELD: dict = {}  # the writers' locks this process holds: path -> file descriptor


class Ledgers:
    """What a job (one writer of the item store) keeps beside the store across its attempts: what it paid
    for and did not store (`probes/`, `unkept/`), its tries (`tries/`), the capability probe it passed
    (`probes/<writer>.checked.json`), the budget it stopped at (`budget/`) and the lock that keeps a
    second live process of the same writer (a requeue while the old job still runs) from sending too."""

    def __init__(self, store):
        d, w = Path(store.directory), store.writer
        self.writer = w
        self.probes, self.unkept = d / "probes" / f"{w}.jsonl", d / "unkept" / f"{w}.jsonl"
        self.tries = ledger_path(d, w)
        self.checked = d / "probes" / f"{w}.checked.json"
        self.stopped = d / "budget" / f"{w}.json"
        self.lock = d / "locks" / f"{w}.lock"

    def hold(self, desc: str) -> None:
        """Take the writer's lock for this process's lifetime (the kernel lets it go when it ends)."""
        if str(self.lock) in HELD:  # this process holds it already (a conversation's turns, a rerun)
            return
        import fcntl
        import os
        import socket

        self.lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise InputError(
                f"{desc}: another live process is this job ({self.writer}): {holder}; it is sending these items "
                f"now, and a second one would send every item again (a requeued job while the old one still "
                f"runs?): stop it or let it finish, then run again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"host {socket.gethostname()}, pid {os.getpid()}, since {time.ctime()}\n".encode(), 0)
        HELD[str(self.lock)] = fd

    def count_earlier(self, budget: Budget, desc: str) -> None:
        """What this job's earlier attempts paid for and did not store, and their tries that may have been
        billed (no answer, or killed in flight), into the budget."""
        for ledger in (self.probes, self.unkept):
            if ledger.exists():
                for line in ledger.read_text().splitlines():
                    budget.stored(json.loads(line)["cost_usd"] if line.strip() else 0.0)
        n_unknown, usd = unsettled(self.tries)
        if n_unknown:
            budget.stored_unknown(usd)
            log.info(
                "%s: %d tries of earlier attempts got no answer: up to $%.4f possibly billed", desc, n_unknown, usd
            )

    def stopped_at(self) -> float | None:
        """The max_cost_usd an earlier attempt stopped at, if any."""
        try:
            return float(json.loads(self.stopped.read_text())["max_cost_usd"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def stop(self, budget: Budget) -> None:
        from genjudge.store import atomic

        record = {"max_cost_usd": budget.limit, "spent_usd": budget.spent, "possibly_billed_usd": budget.possibly}
        atomic.write_text(self.stopped, json.dumps(record))

    def passed_probe(self, probe_id: str) -> dict | None:
        try:
            rec = json.loads(self.checked.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return rec.get("probed") if rec.get("probe") == probe_id else None

    def probe_passed(self, probe_id: str, probed: dict) -> None:
        from genjudge.store import atomic

        atomic.write_text(self.checked, json.dumps({"probe": probe_id, "probed": probed}))


def spent_on(ledger: Path, cost: float) -> None:
    """A line of what this job paid for and did not store (probes/, unkept/), which later attempts count."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"cost_usd": cost, "at": round(time.time(), 3)}) + "\n")
