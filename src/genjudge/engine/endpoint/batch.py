"""Requests as the provider's batch files (`endpoint.batch: true`; OpenAI's Batch API and its copies).

Each file holds at most 50,000 request lines and 200 MB, one line per item with the item's key as its
`custom_id`; results come back in any order within the 24 h window and are matched by it. Each
result is stored the moment its file is read.

Nothing is sent twice. Each uploaded file has a state file of its own in the item store's `batches/`
(`<input file id>.json`: its custom_ids, then its batch's id), written before the batch is created
and again once its id is known; a batch read to the end moves to `batches/done/`. A killed or
requeued job polls the batches it finds there that hold any of its items (and adopts a batch created
from its uploaded file whose id it did not live to write, found among the provider's batches by that
file; a file none of whose batches is listed two minutes after its upload was never submitted, since
a provider's list can lag its creations) instead of submitting again. A file of its own per upload means that jobs sharing the store
(two judges of a run, one writer name) never overwrite each other's state.

Lines that failed, or that the window left undone (OpenAI writes them to the error file as
`batch_expired`; some providers leave them out), go into the next file, up to `max_attempts` files an
item; a line the content filter refused is given up alone, as a direct request is. The budget
reserves each line's worst case before its file is submitted. The provider's own answers are retried
as the direct requests' are (timeouts, dropped connections, 429 and 5xx) up to `max_wait` seconds in
a row; a refusal (another 4xx, or a 429 that says the quota is spent) stops the job with the
provider's message, its batches' state kept for the rerun, and so does a batch that ends `failed`
(the provider's checks refused its file, or its queue of tokens was full): the same file would fail
the same way.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from pathlib import Path

from genjudge.engine.endpoint import policy
from genjudge.engine.endpoint.client import Report, api_errors, charge
from genjudge.engine.endpoint.cost import BudgetReached
from genjudge.engine.endpoint.requests import FilteredAnswer, Incomplete, result
from genjudge.engine.endpoint.settings import SECRETS, redact
from genjudge.store import atomic

log = logging.getLogger("endpoint")
MAX_LINES = 50_000
MAX_BYTES = 200 * 1000 * 1000
WINDOW = "24h"
FINAL = {"completed", "failed", "expired", "cancelled"}
URL = "/v1/chat/completions"
# An error file's line without a response: its code as the retry's cause in the log and the meta.
UNDONE = {"batch_expired": "expired", "batch_cancelled": "cancelled"}
# Adopting a batch: the provider lists newest first; batches created this long before the file's
# upload (clock skew between here and the provider) cannot be its batch.
ADOPT_SKEW = 3600
# A batch whose creation got no answer (a timeout, a dropped connection) may exist all the same, and a
# provider's list can lag its creations: its file is declared never submitted (its lines go into the
# next file) only when a listing this long after the upload still lacks it. Sooner, it would be paid twice.
ADOPT_GRACE = 120.0


class BatchFailed(Exception):
    """The provider refused a whole file (its batch ended `failed`): the same file would fail again."""


class BatchSender:
    """Same interface as client.Sender: run(bodies, key) -> Report."""

    def __init__(
        self, endpoint, budget, on_result, verdict, names, desc, store, keys, on_unkept=None, reasoning=None, items=None
    ):
        self.endpoint = endpoint
        self.store = store
        self.reasoning = reasoning  # the (open, close) markers a separate reasoning trace is kept between
        self.items = items  # each body's item id (and sample), recorded with its line for whoever reads it
        self.budget = budget
        self.on_result = on_result
        self.on_unkept = on_unkept  # (cost) -> None: a paid line thrown away, recorded for later attempts
        self.verdict = verdict
        self.names = names
        self.desc = desc
        self.keys = keys  # each body's item key: its custom_id
        self.state_dir = Path(store.directory) / "batches"
        self.writer = store.writer
        self.report = Report()
        self.report.batches = []  # ids of the batches this attempt submitted or polled
        self.rng = random.Random(0)
        self.uploaded: dict = {}  # input file id -> its lines, of the files this attempt uploaded
        self.adopt_grace = ADOPT_GRACE

    # --- state: one file per uploaded file ----------------------------------------------------------

    def _entries(self, index: dict) -> list[dict]:
        """The batch files of earlier attempts, not yet read to the end, that hold any of these items."""
        found = []
        for path in sorted(self.state_dir.glob("*.json")):
            try:
                entry = json.loads(path.read_text())
            except FileNotFoundError:  # read to the end by another job meanwhile
                continue
            if "input_file_id" in entry and any(c in index for c in entry["custom_ids"]):
                found.append(entry)
        return sorted(found, key=lambda e: e["submitted_at"])

    def _path(self, entry: dict) -> Path:
        return self.state_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", entry["input_file_id"]) + ".json")

    def _save(self, entry: dict) -> None:
        path = self._path(entry)
        if entry.get("finished"):
            atomic.write_text(path.parent / "done" / path.name, json.dumps(entry, indent=1))
            path.unlink(missing_ok=True)
        else:
            atomic.write_text(path, json.dumps(entry, indent=1))

    # --- the provider's answers -----------------------------------------------------------------------

    # --- running ----------------------------------------------------------------------------------

    def run(self, bodies: list[dict], key: str) -> Report:
        import openai

        for name in ("httpx", "httpx2", "openai"):
            logging.getLogger(name).setLevel(logging.WARNING)
        t0 = time.monotonic()
        # Redirects are not followed (policy.redirected), as the direct requests' client.
        http = openai.DefaultHttpxClient(follow_redirects=False, timeout=self.endpoint.timeout)
        self.client = openai.OpenAI(
            base_url=self.endpoint.base_url,
            api_key=key,
            max_retries=0,
            timeout=self.endpoint.timeout,
            default_headers=self.endpoint.headers() or None,
            http_client=http,
        )
        self.secrets = [key]
        index = {k: j for j, k in enumerate(self.keys)}
        self.tries = dict.fromkeys(range(len(bodies)), 0)
        pending = set(range(len(bodies)))  # no result yet
        # Batches an earlier attempt submitted: polled, never submitted again.
        live = self._entries(index)
        for entry in live:
            self._count(entry, index, +1)
            for cid in entry["custom_ids"]:  # their worst case is set aside as a new file's would be
                if cid in index:
                    self.budget.hold(("batch", index[cid]), bodies[index[cid]])
            log.info(
                "%s: batch %s (file %s) of an earlier attempt holds %d of these items: polling it",
                self.desc,
                entry.get("id", "not yet known"),
                entry["input_file_id"],
                sum(c in index for c in entry["custom_ids"]),
            )
        failures, waited = 0, 0.0  # the provider's failed answers in a row, and the wait they cost
        while pending:
            try:
                going = self._step(live, index, bodies, pending)
                failures, waited = 0, 0.0
            except policy.Retry as exc:
                wait = policy.wait_for(exc, failures, self.rng)
                message = redact(str(exc), self.secrets)[:300]
                if waited + wait > self.endpoint.max_wait:
                    raise RuntimeError(
                        f"{self.desc}: the batch API at {self.endpoint.url} kept failing for {waited:.0f} s "
                        f"(endpoint.max_wait {self.endpoint.max_wait:g} s): last {message}; the batches' "
                        f"state is kept, a rerun polls them"
                    ) from None
                failures += 1
                waited += wait
                self.report.wait_seconds += wait
                log.warning("%s: the batch API failed (%s); again in %.1f s", self.desc, message, wait)
                time.sleep(wait)
                continue
            except (policy.Refused, policy.TooLong, policy.Filtered, BatchFailed) as exc:
                self.report.refused = redact(str(exc), self.secrets)
                log.error("%s: the batch API refused: %s; nothing more is sent", self.desc, self.report.refused)
                self.report.unsent.extend(sorted(pending))
                break
            if not going:  # nothing submitted and nothing to poll: the budget stopped it
                self.report.unsent.extend(sorted(pending))
                break
            if pending and live:  # else the lines left go into the next file at once
                time.sleep(self.endpoint.batch_poll_seconds)
        self.report.seconds = time.monotonic() - t0
        return self.report

    def _count(self, entry: dict, index: dict, step: int) -> None:
        for cid in entry["custom_ids"]:
            if cid in index:
                self.tries[index[cid]] += step

    def _step(self, live: list, index: dict, bodies: list[dict], pending: set) -> bool:
        """Submit what no batch holds, then look at each live batch once; False where none was live."""
        covered = {index[c] for e in live for c in e["custom_ids"] if c in index}
        fresh = sorted(j for j in pending - covered if self.tries[j] < self.endpoint.max_attempts)
        for j in sorted(pending - covered):
            if self.tries[j] >= self.endpoint.max_attempts:
                pending.discard(j)
                self.report.failed[j] = f"gave up after {self.tries[j]} batch files without a result"
                self.report.given_up["batch"] += 1
        if fresh and not self.budget.stopped:
            for chunk in self._chunks(fresh, bodies):
                if len(self._submit(live, chunk, bodies, index)) < len(chunk):
                    break
        if not live:
            return False
        for entry in list(live):
            self._poll(entry, index, bodies, pending)
            if entry.get("finished"):
                live.remove(entry)
        return True

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

    def _submit(self, live: list, chunk: list[int], bodies: list[dict], index: dict) -> list[int]:
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
        try:
            with api_errors():
                upload = self.client.files.create(file=("requests.jsonl", data), purpose="batch")
        except BaseException:
            for j in allowed:
                self.budget.release(("batch", j))
            raise
        entry = {
            "input_file_id": upload.id,
            "custom_ids": [self.keys[j] for j in allowed],
            # Whoever reads the batch stores every paid line under its key, for the job it belongs to.
            "items": {self.keys[j]: self.items[j] for j in allowed} if self.items else {},
            "submitted_at": time.time(),
            "endpoint": self.endpoint.url,
            "job": self.writer,
        }
        # Before the batch exists: a restart (or this job, if the answer is lost) finds it by its file.
        self._save(entry)
        live.append(entry)
        self._count(entry, index, +1)
        self.uploaded[upload.id] = len(allowed)
        with api_errors():
            batch = self.client.batches.create(input_file_id=upload.id, endpoint=URL, completion_window=WINDOW)
        entry["id"] = batch.id
        self._save(entry)
        self.report.requests += len(allowed)
        self.report.batches.append(batch.id)
        log.info("%s: submitted batch %s with %d requests (file %s)", self.desc, batch.id, len(allowed), upload.id)
        return allowed

    def _adopt(self, entry: dict) -> bool:
        """The batch of an uploaded file whose id the state lacks (killed between the two), if one exists."""
        since = entry["submitted_at"] - ADOPT_SKEW
        with api_errors():
            for batch in self.client.batches.list(limit=100):  # newest first, page after page
                if batch.input_file_id == entry["input_file_id"]:
                    entry["id"] = batch.id
                    self._save(entry)
                    self.report.requests += self.uploaded.get(batch.input_file_id, 0)  # sent by this attempt
                    log.info(
                        "%s: found batch %s of file %s among the provider's batches (its id was never recorded)",
                        self.desc,
                        batch.id,
                        entry["input_file_id"],
                    )
                    return True
                if batch.created_at < since:
                    break
        return False

    def _release(self, entry: dict, index: dict) -> None:
        for cid in entry["custom_ids"]:
            if cid in index:
                self.budget.release(("batch", index[cid]))

    def _poll(self, entry: dict, index: dict, bodies: list[dict], pending: set) -> None:
        if "id" not in entry and not self._adopt(entry):
            if time.time() - entry["submitted_at"] < self.adopt_grace:  # the list may not show it yet
                log.info(
                    "%s: no batch of file %s is listed yet; looking again (until %.0f s after its upload)",
                    self.desc,
                    entry["input_file_id"],
                    self.adopt_grace,
                )
                return
            log.info(
                "%s: file %s was never submitted; its lines go into the next file", self.desc, entry["input_file_id"]
            )
            entry["finished"] = True  # never submitted: its lines go into the next file
            entry["status"] = "not submitted"
            self._save(entry)
            self._release(entry, index)
            self._count(entry, index, -1)
            return
        if entry["id"] not in self.report.batches:
            self.report.batches.append(entry["id"])
        with api_errors():
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
            if cid in seen:
                continue
            if cid not in index:  # another job's item (another shard layout): paid, so stored for it
                seen.add(cid)
                self._store_foreign(entry, cid, line)
                continue
            seen.add(cid)
            j = index[cid]
            self.budget.release(("batch", j))
            if j not in pending:  # stored already (read before a failure of the provider's answers)
                continue
            self._line_result(entry, j, line, bodies, pending)
        for cid in entry["custom_ids"]:
            if cid in index and cid not in seen:
                self.budget.release(("batch", index[cid]))
                if index[cid] in pending and batch.status != "failed":
                    self.report.retries[batch.status] += 1  # left out (expired, or the batch failed): next file
        entry["finished"] = True
        entry["status"] = batch.status
        self._save(entry)
        log.info("%s: batch %s %s: %d results read", self.desc, entry["id"], batch.status, len(seen))
        if batch.status == "failed":
            # The provider's checks refused the file (or its queue was full): another file now would
            # fail the same way. The job stops, naming the errors; a rerun submits the lines again.
            errors = [e.model_dump(exclude_none=True) for e in (batch.errors.data or [])] if batch.errors else []
            raise BatchFailed(
                f"batch {entry['id']} (file {entry['input_file_id']}) failed: {json.dumps(errors)[:2000]}"
            )

    def _store_foreign(self, entry: dict, cid: str, line: dict) -> None:
        """A paid line of an item this job does not hold (an earlier job of another shard layout submitted
        it): stored under its key for the job that submitted it, whose later attempts count its cost, so
        that no job uploads it again. Lines without a usable answer are left to that item's own job."""
        response = line.get("response") or {}
        if response.get("status_code") != 200 or line.get("error") or self.store.load({cid}):
            return
        try:
            res = result(response.get("body") or {}, self.verdict, self.endpoint.prefill, self.reasoning)
        except (Incomplete, FilteredAnswer):
            return
        price = self.budget.price
        res["cost_usd"] = (
            None
            if res.get("usage_missing")
            else price.cost(res["n_prompt_tokens"], res["completion_tokens"], True, res.get("cached_tokens", 0))
        )
        item = (entry.get("items") or {}).get(cid) or {}
        rec = {**res, "attempts": 1, "batch_id": entry.get("id"), "key": cid, "job": entry.get("job"), **item}
        rec.setdefault("id", None)
        self.store.append([SECRETS.scrub(rec, exact=True)])
        self.report.stored_for_others += 1

    def _line_result(self, entry: dict, j: int, line: dict, bodies: list[dict], pending: set) -> None:
        """One line of an output or error file: stored, or retried, or given up."""
        response = line.get("response") or {}
        status = response.get("status_code")
        if not response and line.get("error"):  # no answer at all: the window or a cancel left it undone
            code = line["error"].get("code")
            self.report.retries[UNDONE.get(code, code or "error")] += 1
            return
        if status == 200 and not line.get("error"):
            try:
                res = result(response.get("body") or {}, self.verdict, self.endpoint.prefill, self.reasoning)
            except Incomplete as exc:
                self.report.retries["incomplete"] += 1
                charge(self.budget, ("batch", j), bodies[j], exc.usage, self.report, self.on_unkept)
                log.info("%s: item %r: %s; into the next file", self.desc, self.names[j], exc)
                return
            except FilteredAnswer as exc:
                self.report.filtered += 1
                if self.endpoint.on_filtered != "count_wrong":
                    charge(self.budget, ("batch", j), bodies[j], exc.usage, self.report, self.on_unkept)
                    self.report.unkept -= 1
                    self.report.failed[j] = f"{exc} (endpoint.on_filtered: fail; a rerun asks again)"
                    self.report.given_up[exc.partial["finish_reason"]] += 1
                    pending.discard(j)
                    return
                res = dict(exc.partial)
            if res.get("usage_missing"):
                res["cost_usd"] = None
                res["possibly_billed_usd"] = self.budget.unbilled(("batch", j), bodies[j])
                self.report.usage_missing += 1
            else:
                res["cost_usd"] = self.budget.paid(
                    ("batch", j),
                    bodies[j],
                    res["n_prompt_tokens"],
                    res["completion_tokens"],
                    cached_tokens=res.get("cached_tokens", 0),
                    reasoning_tokens=res.get("reasoning_tokens", 0),
                )
            res["attempts"] = self.tries[j]
            res["batch_id"] = entry["id"]
            self.report.served_models[res.get("served_model")] += 1
            self.report.fingerprints[res.get("system_fingerprint")] += 1
            self.on_result(j, res)
            self.report.done += 1
            pending.discard(j)
            return
        error = line.get("error") or (response.get("body") or {}).get("error")
        message = json.dumps(error or response)[:500]
        code = (error.get("code") or error.get("type")) if isinstance(error, dict) else None
        err = policy.classify(int(status or 500), message, None, code)
        if isinstance(err, policy.TooLong):
            self.report.too_long[j] = message
            pending.discard(j)
        elif isinstance(err, policy.Filtered):  # as a direct request's: this item is given up, the others go on
            self.report.failed[j] = (
                f"refused by the provider's content filter (not retried): {redact(str(err), self.secrets)}"
            )
            self.report.given_up["content_filter"] += 1
            pending.discard(j)
        elif isinstance(err, policy.Refused) and err.status in (400, 404, 422):
            self.report.failed[j] = redact(str(err), self.secrets)
            self.report.given_up[str(err.status)] += 1
            pending.discard(j)
        else:
            self.report.retries[str(status or "error")] += 1

    def _lines(self, file_id: str | None) -> list[dict]:
        if not file_id:
            return []
        with api_errors():
            text = self.client.files.content(file_id).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]
