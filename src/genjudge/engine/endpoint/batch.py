"""Requests as the provider's batch files (`endpoint.batch: true`; OpenAI's Batch API and its copies).

Each file holds at most 50,000 request lines and 200 MB, one line per item with the item's key as its
`custom_id`; results come back in any order within the 24 h window and are matched by it. Each
result is stored the moment its file is read.

Nothing is sent twice. Before a file is submitted, the job's state file (beside its item store) says
so with the uploaded file's id; once the batch exists, its id. A killed or requeued job reads its
state and polls the batches it finds there (and adopts a batch created from its uploaded file whose
id it did not live to write, found by listing the provider's batches) instead of submitting again.
Lines that failed or that the window left undone go into the next file, up to `max_attempts` files
an item; the budget reserves each line's worst case before its file is submitted.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from genjudge.engine.endpoint import policy
from genjudge.engine.endpoint.client import Report
from genjudge.engine.endpoint.cost import BudgetReached
from genjudge.engine.endpoint.requests import Incomplete, result
from genjudge.engine.endpoint.settings import redact
from genjudge.store import atomic

log = logging.getLogger("endpoint")
MAX_LINES = 50_000
MAX_BYTES = 200 * 1000 * 1000
WINDOW = "24h"
FINAL = {"completed", "failed", "expired", "cancelled"}
URL = "/v1/chat/completions"


class BatchSender:
    """Same interface as client.Sender: run(bodies, key) -> Report."""

    def __init__(self, endpoint, budget, on_result, verdict, names, desc, store, keys):
        self.endpoint = endpoint
        self.budget = budget
        self.on_result = on_result
        self.verdict = verdict
        self.names = names
        self.desc = desc
        self.keys = keys  # each body's item key: its custom_id
        self.state_path = Path(store.directory) / "batches" / f"{store.writer}.json"
        self.report = Report()
        self.report.batches = []

    # --- state ------------------------------------------------------------------------------------

    def _load(self) -> dict:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {"batches": []}

    def _save(self, state: dict) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(self.state_path, json.dumps(state, indent=1))

    # --- running ----------------------------------------------------------------------------------

    def run(self, bodies: list[dict], key: str) -> Report:
        from openai import OpenAI

        for name in ("httpx", "httpx2", "openai"):
            logging.getLogger(name).setLevel(logging.WARNING)
        t0 = time.monotonic()
        self.client = OpenAI(base_url=self.endpoint.base_url, api_key=key, max_retries=0, timeout=self.endpoint.timeout)
        self.secrets = [key]
        index = {k: j for j, k in enumerate(self.keys)}
        tries = dict.fromkeys(range(len(bodies)), 0)
        state = self._load()
        pending = set(range(len(bodies)))  # no result yet
        # Batches an earlier attempt submitted: polled, never submitted again.
        for b in state["batches"]:
            if not b.get("finished"):
                for cid in b["custom_ids"]:
                    if cid in index:
                        tries[index[cid]] += 1
        while pending:
            live = [b for b in state["batches"] if not b.get("finished")]
            covered = {index[c] for b in live for c in b["custom_ids"] if c in index}
            fresh = sorted(j for j in pending - covered if tries[j] < self.endpoint.max_attempts)
            gave_up = sorted(j for j in pending - covered if tries[j] >= self.endpoint.max_attempts)
            for j in gave_up:
                pending.discard(j)
                self.report.failed[j] = f"gave up after {tries[j]} batch files without a result"
                self.report.given_up["batch"] += 1
            if fresh and not self.budget.stopped:
                for chunk in self._chunks(fresh, bodies):
                    submitted = self._submit(state, chunk, bodies)
                    for j in submitted:
                        tries[j] += 1
                    if len(submitted) < len(chunk):
                        break
            live = [b for b in state["batches"] if not b.get("finished")]
            if not live:
                for j in sorted(pending):
                    self.report.unsent.append(j)
                break
            for b in live:
                self._poll(state, b, index, bodies, pending)
            if any(not b.get("finished") for b in state["batches"]):
                time.sleep(self.endpoint.batch_poll_seconds)
        self.report.seconds = time.monotonic() - t0
        return self.report

    def _chunks(self, todo: list[int], bodies: list[dict]):
        chunk, size = [], 0
        for j in todo:
            n = len(self._line(j, bodies)) + 1
            if chunk and (len(chunk) >= MAX_LINES or size + n > MAX_BYTES):
                yield chunk
                chunk, size = [], 0
            chunk.append(j)
            size += n
        if chunk:
            yield chunk

    def _line(self, j: int, bodies: list[dict]) -> str:
        return json.dumps(
            {"custom_id": self.keys[j], "method": "POST", "url": URL, "body": bodies[j]}, ensure_ascii=False
        )

    def _submit(self, state: dict, chunk: list[int], bodies: list[dict]) -> list[int]:
        """Upload and submit one file of `chunk`'s requests (those the budget allows); the indices sent."""
        allowed = []
        for j in chunk:
            try:
                self.budget.reserve(("batch", j), bodies[j])
            except BudgetReached as exc:
                log.warning("%s: budget reached, no more requests are submitted: %s", self.desc, exc)
                break
            allowed.append(j)
        if not allowed:
            return []
        data = "".join(self._line(j, bodies) + "\n" for j in allowed).encode()
        upload = self.client.files.create(file=("requests.jsonl", data), purpose="batch")
        entry = {"input_file_id": upload.id, "custom_ids": [self.keys[j] for j in allowed], "submitted_at": time.time()}
        state["batches"].append(entry)
        self._save(state)  # before the batch exists: a restart finds it by its input file
        batch = self.client.batches.create(input_file_id=upload.id, endpoint=URL, completion_window=WINDOW)
        entry["id"] = batch.id
        self._save(state)
        self.report.requests += len(allowed)
        self.report.batches.append(batch.id)
        log.info("%s: submitted batch %s with %d requests (file %s)", self.desc, batch.id, len(allowed), upload.id)
        return allowed

    def _adopt(self, entry: dict) -> bool:
        """The batch of an uploaded file whose id the state lacks (killed between the two), if one exists."""
        for batch in self.client.batches.list(limit=100):
            if batch.input_file_id == entry["input_file_id"]:
                entry["id"] = batch.id
                return True
        return False

    def _poll(self, state: dict, entry: dict, index: dict, bodies: list[dict], pending: set) -> None:
        if "id" not in entry and not self._adopt(entry):
            entry["finished"] = True  # never submitted: its lines go into the next file
            entry["status"] = "not submitted"
            self._save(state)
            for cid in entry["custom_ids"]:
                if cid in index:
                    self.budget.release(("batch", index[cid]))
            return
        batch = self.client.batches.retrieve(entry["id"])
        if batch.status not in FINAL:
            counts = batch.request_counts
            log.info(
                "%s: batch %s %s (%s of %s done)",
                self.desc,
                entry["id"],
                batch.status,
                getattr(counts, "completed", "?"),
                getattr(counts, "total", "?"),
            )
            return
        seen = set()
        for line in self._lines(batch.output_file_id) + self._lines(batch.error_file_id):
            cid = line.get("custom_id")
            if cid not in index or cid in seen:
                continue
            seen.add(cid)
            j = index[cid]
            self.budget.release(("batch", j))
            response = line.get("response") or {}
            if j not in pending:
                continue
            status = response.get("status_code")
            if status == 200 and not line.get("error"):
                try:
                    res = result(response.get("body") or {}, self.verdict, self.endpoint.prefill)
                except Incomplete as exc:
                    self.report.retries["incomplete"] += 1
                    log.info("%s: item %r: %s; into the next file", self.desc, self.names[j], exc)
                    continue
                res["cost_usd"] = self.budget.paid(
                    ("batch", j), bodies[j], res["n_prompt_tokens"], res["completion_tokens"]
                )
                res["attempts"] = 1
                res["batch_id"] = entry["id"]
                self.report.served_models[res.get("served_model")] += 1
                self.report.fingerprints[res.get("system_fingerprint")] += 1
                self.on_result(j, res)
                self.report.done += 1
                pending.discard(j)
                continue
            message = json.dumps(line.get("error") or (response.get("body") or {}).get("error") or response)[:500]
            err = policy.classify(int(status or 500), message, None)
            if isinstance(err, policy.TooLong):
                self.report.too_long[j] = message
                pending.discard(j)
            elif isinstance(err, policy.Refused) and err.status in (400, 404, 422):
                self.report.failed[j] = redact(str(err), self.secrets)
                self.report.given_up[str(err.status)] += 1
                pending.discard(j)
            else:
                self.report.retries[str(status or "error")] += 1
        for cid in entry["custom_ids"]:
            if cid in index and cid not in seen:
                self.budget.release(("batch", index[cid]))
                self.report.retries[batch.status] += 1  # expired (or the batch failed): into the next file
        entry["finished"] = True
        entry["status"] = batch.status
        self._save(state)
        log.info("%s: batch %s %s: %d results read", self.desc, entry["id"], batch.status, len(seen))

    def _lines(self, file_id: str | None) -> list[dict]:
        if not file_id:
            return []
        text = self.client.files.content(file_id).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]
