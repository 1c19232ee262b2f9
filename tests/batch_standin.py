"""A loopback stand-in of a provider's file and batch endpoints (OpenAI's Files and Batch API), for the
tests: the provider's batch service cannot be reached from here. Each request line of a batch is sent
to a real model server (vLLM's OpenAI-compatible server) and its answer written as the provider writes
it; only the file and batch bookkeeping is the stand-in's own.

What it serves, shaped by the `openai` client's own models (`FileObject`, `Batch`) so that the client
parses it as it parses the provider's answers:
- POST /v1/files (multipart, purpose batch), GET /v1/files/{id}, GET /v1/files/{id}/content;
- POST /v1/batches (the input file checked as the provider checks it: JSON lines with a unique
  `custom_id`, method POST and the batch's url; a file that fails ends the batch `failed` with its
  `errors`), GET /v1/batches/{id}, GET /v1/batches (newest first, cursor pages: `limit`, `after`,
  `has_more`), POST /v1/batches/{id}/cancel;
- anything else (a direct chat completion, such as a capability probe; /v1/models) is forwarded to
  the server unchanged.

A batch's results: the output file holds each 200 answer as
`{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}`, the error file
each other answer the same way, and each line the window left undone as
`{"custom_id", "response": null, "error": {"code": "batch_expired", ...}}` (as OpenAI does; with
`expired_lines="missing"` such lines are in neither file, as some providers leave them). Lines come
in any order (`shuffle`).

What a test controls: `hold` keeps every batch in_progress until `release()`; `hold_create` keeps the
answer to POST /v1/batches back (the batch exists, the client does not learn its id) until
`release()`; `drop_create` drops the connection of the first POST /v1/batches instead of its answer
(the batch exists, its id never arrives); `list_lag` keeps a new batch out of GET /v1/batches for
that many seconds (a provider's list lags its creations); `expire` and `fail` are the shares of
lines, drawn with `seed` the first time a custom_id is sent, that the window leaves undone (the batch
then ends `expired`) or that fail with a 500; `api_faults` is the share of looks, lists and downloads
answered 429 (Retry-After: 1), 500 or 503 instead; `reject` fails every batch's checks with that
error code; `refuse_uploads` answers every upload with that status. What it counts: uploads, batch creations, lines per
custom_id (uploaded and in created batches), looks at each batch, list calls, injected faults, direct
requests.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import threading
import time
from collections import Counter

from endpoints import item_of

FINAL = {"completed", "failed", "expired", "cancelled"}
WINDOWS = {"24h"}


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


class BatchStandIn:
    def __init__(
        self,
        upstream: str,
        *,
        seed: int = 0,
        expire: float = 0.0,
        fail: float = 0.0,
        shuffle: bool = True,
        hold: bool = False,
        hold_create: bool = False,
        drop_create: bool = False,
        list_lag: float = 0.0,
        api_faults: float = 0.0,
        reject: str | None = None,
        refuse_uploads: int | None = None,
        expired_lines: str = "error_file",
        concurrency: int = 8,
    ):
        self.upstream = upstream.rstrip("/")
        self.rng = random.Random(seed)
        self.fault_rng = random.Random(seed + 1)  # the API's faults: the lines' fates stay the same
        self.drop_create, self.api_faults = drop_create, api_faults
        self.list_lag = list_lag  # seconds before a new batch shows in GET /v1/batches (eventual consistency)
        self.reject, self.refuse_uploads = reject, refuse_uploads
        self.expire, self.fail, self.shuffle = expire, fail, shuffle
        self.hold, self.hold_create = hold, hold_create
        assert expired_lines in ("error_file", "missing")
        self.expired_lines = expired_lines
        self.concurrency = concurrency
        self.files: dict = {}  # id -> {"object": FileObject fields, "data": bytes}
        self.batches: dict = {}  # id -> Batch fields, in order of creation
        self.lines_of: dict = {}  # batch id -> its custom_ids, in file order
        self.created_at: dict = {}  # batch id -> time.time() of its creation
        self.uploads = 0
        self.creations = 0
        self.uploaded_lines: Counter = Counter()  # custom_id -> lines in uploaded files
        self.batched_lines: Counter = Counter()  # custom_id -> lines in created batches
        self.retrieved: Counter = Counter()  # batch id -> GET /v1/batches/{id}
        self.listed = 0  # GET /v1/batches
        self.direct: Counter = Counter()  # item_of(body) -> direct chat completions (not in a batch)
        self.expired: set = set()  # custom_ids the window left undone once
        self.failed: set = set()  # custom_ids answered 500 once
        self.injected: Counter = Counter()  # status -> looks and downloads answered with it instead
        self.events: list = []  # (time.time(), what, batch or file id)
        self.lock = threading.Lock()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the batch stand-in did not start")
        self.url = f"http://127.0.0.1:{self.port}/v1"

    # --- control, from the test's thread ----------------------------------------------------------------

    def release(self) -> None:
        """Let held batches run and held creations answer (and those to come)."""
        self.hold = self.hold_create = False
        self.loop.call_soon_threadsafe(self._go.set)
        self.loop.call_soon_threadsafe(self._create_go.set)

    def stop(self) -> None:
        async def close():
            self._create_go.set()  # a held answer would keep the server from closing
            for task in self._tasks.values():
                task.cancel()
            await self.runner.cleanup()
            await self.session.close()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def status(self, batch_id: str) -> str:
        with self.lock:
            return self.batches[batch_id]["status"]

    def created_ids(self) -> list[str]:
        with self.lock:
            return list(self.batches)

    # --- plumbing ---------------------------------------------------------------------------------------

    def _serve(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        import aiohttp
        from aiohttp import web

        self._go, self._create_go = asyncio.Event(), asyncio.Event()
        if not self.hold:
            self._go.set()
        if not self.hold_create:
            self._create_go.set()
        self._tasks: dict = {}  # batch id -> the task that runs it
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
        app = web.Application(client_max_size=256 * 1024 * 1024)  # a batch file is up to 200 MB
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._content)
        r.add_get("/v1/files/{id}", self._file)
        r.add_post("/v1/batches", self._create)
        r.add_get("/v1/batches", self._list)
        r.add_get("/v1/batches/{id}", self._retrieve)
        r.add_post("/v1/batches/{id}/cancel", self._cancel)
        r.add_route("*", "/{tail:.*}", self._forward)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    def _event(self, what: str, ref: str) -> None:
        with self.lock:
            self.events.append((time.time(), what, ref))

    @staticmethod
    def _json(data, status: int = 200):
        from aiohttp import web

        return web.json_response(data, status=status)

    def _error(self, status: int, message: str, param: str | None = None):
        err = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
        return self._json({"error": err}, status)

    def _new_file(self, data: bytes, filename: str, purpose: str) -> dict:
        from openai.types import FileObject

        obj = FileObject(
            id=_id("file"),
            bytes=len(data),
            created_at=int(time.time()),
            filename=filename,
            object="file",
            purpose=purpose,
            status="processed",
        ).model_dump(mode="json")
        self.files[obj["id"]] = {"object": obj, "data": data}
        return obj

    def _batch(self, batch_id: str) -> dict:
        """The batch as the provider answers it, through the client's own model."""
        from openai.types import Batch

        return Batch.model_validate(self.batches[batch_id]).model_dump(mode="json")

    def _fault(self):
        """`api_faults` of the looks, lists and downloads (calls that change nothing) fail: a 429 with
        Retry-After, a 500 or a 503, drawn with the seed."""
        if not self.api_faults or self.fault_rng.random() >= self.api_faults:
            return None
        status = self.fault_rng.choice((429, 500, 503))
        with self.lock:
            self.injected[status] += 1
        response = self._json({"error": {"message": "injected", "type": "server_error", "code": None}}, status)
        if status == 429:
            response.headers["Retry-After"] = "1"
        return response

    # --- files -----------------------------------------------------------------------------------------

    async def _upload(self, request):
        if self.refuse_uploads:
            return self._error(self.refuse_uploads, "Incorrect API key provided.")
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if upload is None or not hasattr(upload, "file"):
            return self._error(400, "'file' is a required property", "file")
        if purpose != "batch":
            return self._error(400, f"this stand-in takes files for purpose 'batch', not {purpose!r}", "purpose")
        data = upload.file.read()
        obj = self._new_file(data, upload.filename or "upload.jsonl", "batch")
        with self.lock:
            self.uploads += 1
            for line in data.decode().splitlines():
                try:
                    self.uploaded_lines[json.loads(line).get("custom_id")] += 1
                except (json.JSONDecodeError, AttributeError):
                    pass
        self._event("upload", obj["id"])
        return self._json(obj)

    async def _file(self, request):
        f = self.files.get(request.match_info["id"])
        return self._json(f["object"]) if f else self._error(404, "No such File object", "id")

    async def _content(self, request):
        from aiohttp import web

        if fault := self._fault():
            return fault
        f = self.files.get(request.match_info["id"])
        if f is None:
            return self._error(404, "No such File object", "id")
        return web.Response(body=f["data"], content_type="application/octet-stream")

    # --- batches ---------------------------------------------------------------------------------------

    async def _create(self, request):
        args = await request.json()
        file_id, endpoint, window = args.get("input_file_id"), args.get("endpoint"), args.get("completion_window")
        if file_id not in self.files:
            return self._error(404, f"No such File object: {file_id}", "input_file_id")
        if window not in WINDOWS:
            return self._error(400, f"completion_window must be one of {sorted(WINDOWS)}", "completion_window")
        now = int(time.time())
        batch_id = _id("batch")
        lines, errors = self._read_input(self.files[file_id]["data"], endpoint)
        if self.reject:
            errors.append({"code": self.reject, "line": None, "message": f"refused: {self.reject}"})
        with self.lock:
            self.creations += 1
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": endpoint,
                "input_file_id": file_id,
                "completion_window": window,
                "status": "validating",
                "created_at": now,
                "expires_at": now + 24 * 3600,
                "metadata": args.get("metadata"),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }
            self.lines_of[batch_id] = [line["custom_id"] for line in lines]
            self.created_at[batch_id] = time.time()
            for line in lines:
                cid = line["custom_id"]
                self.batched_lines[cid] += 1
                if self.batched_lines[cid] == 1:  # a line's fate is drawn on its first batch only
                    r = self.rng.random()
                    if r < self.expire:
                        self.expired.add(cid)
                    elif r < self.expire + self.fail:
                        self.failed.add(cid)
        self._event("create", batch_id)
        task = asyncio.get_running_loop().create_task(self._process(batch_id, lines, errors))
        self._tasks[batch_id] = task
        await self._create_go.wait()  # hold_create: the batch exists; the client learns its id later
        if self.drop_create and self.creations == 1:  # the batch exists; the answer is lost
            request.transport.abort()
        return self._json(self._batch(batch_id))

    def _read_input(self, data: bytes, endpoint: str) -> tuple[list[dict], list[dict]]:
        """The file's request lines, and the errors the provider's validation would find in it."""
        lines, errors, seen = [], [], set()
        for n, raw in enumerate(data.decode().splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                errors.append({"code": "invalid_json_line", "line": n, "message": "not JSON"})
                continue
            cid = line.get("custom_id")
            if not isinstance(cid, str) or not cid:
                errors.append({"code": "missing_required_parameter", "line": n, "message": "no custom_id"})
            elif cid in seen:
                errors.append({"code": "duplicate_custom_id", "line": n, "message": f"custom_id {cid} repeated"})
            if line.get("method") != "POST" or line.get("url") != endpoint:
                errors.append({"code": "invalid_url", "line": n, "message": f"the batch's url is {endpoint}"})
            if not isinstance(line.get("body"), dict):
                errors.append({"code": "missing_required_parameter", "line": n, "message": "no body"})
            seen.add(cid)
            lines.append(line)
        return lines, errors

    async def _process(self, batch_id: str, lines: list[dict], errors: list[dict]) -> None:
        b = self.batches[batch_id]
        if errors:
            with self.lock:
                b.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": errors})
            self._event("failed", batch_id)
            return
        with self.lock:
            b.update(status="in_progress", in_progress_at=int(time.time()))
        await self._go.wait()  # hold
        sem = asyncio.Semaphore(self.concurrency)

        async def one(line: dict) -> tuple[str, dict]:
            cid = line["custom_id"]
            first = self._first_batch_of(cid) == batch_id  # a line's drawn fate, in its first batch only
            if first and cid in self.expired:
                return "expired", {"custom_id": cid}
            if first and cid in self.failed:
                body = {
                    "error": {"message": "The server had an error processing your request.", "type": "server_error"}
                }
                with self.lock:
                    b["request_counts"]["failed"] += 1
                return "error", self._answer(cid, 500, body)
            async with sem:
                status, body = await self._post(b["endpoint"], line["body"])
            with self.lock:
                b["request_counts"]["completed" if status == 200 else "failed"] += 1
            return ("output" if status == 200 else "error"), self._answer(cid, status, body)

        done = await asyncio.gather(*(one(line) for line in lines))
        self._finish(batch_id, done)

    def _first_batch_of(self, cid: str) -> str:
        return next(bid for bid, cids in self.lines_of.items() if cid in cids)

    def _answer(self, cid: str, status: int, body: dict) -> dict:
        response = {"status_code": status, "request_id": _id("req"), "body": body}
        return {"id": _id("batch_req"), "custom_id": cid, "response": response, "error": None}

    async def _post(self, path: str, body: dict) -> tuple[int, dict]:
        url = self.upstream.rsplit("/v1", 1)[0] + path
        async with self.session.post(url, json=body) as r:
            text = await r.text()
        try:
            return r.status, json.loads(text)
        except json.JSONDecodeError:
            return r.status, {"error": {"message": text[:500], "type": "server_error"}}

    def _finish(self, batch_id: str, done: list[tuple[str, dict]], status: str | None = None) -> None:
        out = [line for kind, line in done if kind == "output"]
        err = [line for kind, line in done if kind == "error"]
        gone = [line["custom_id"] for kind, line in done if kind in ("expired", "cancelled")]
        if status is None:
            status = "expired" if any(kind == "expired" for kind, _ in done) else "completed"
        if self.expired_lines == "error_file":
            code = "batch_expired" if status == "expired" else "batch_cancelled"
            why = {"batch_expired": "This request could not be executed before the completion window expired."}
            err += [
                {
                    "id": _id("batch_req"),
                    "custom_id": cid,
                    "response": None,
                    "error": {"code": code, "message": why.get(code, "The batch was cancelled.")},
                }
                for cid in gone
            ]
        if self.shuffle:
            self.rng.shuffle(out)
            self.rng.shuffle(err)
        now = int(time.time())
        with self.lock:
            b = self.batches[batch_id]
            for lines, field in ((out, "output_file_id"), (err, "error_file_id")):
                if lines:
                    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                    b[field] = self._new_file(data, f"{batch_id}_{field[:-8]}.jsonl", "batch_output")["id"]
            b["status"] = status
            b["finalizing_at"] = now
            b[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = now
        self._event(status, batch_id)

    async def _retrieve(self, request):
        if fault := self._fault():
            return fault
        batch_id = request.match_info["id"]
        if batch_id not in self.batches:
            return self._error(404, f"No batch found with id '{batch_id}'.", "id")
        with self.lock:
            self.retrieved[batch_id] += 1
        self._event("retrieve", batch_id)
        return self._json(self._batch(batch_id))

    async def _list(self, request):
        if fault := self._fault():
            return fault
        limit = int(request.query.get("limit", 20))
        after = request.query.get("after")
        with self.lock:
            self.listed += 1
            shown = time.time() - self.list_lag
            ids = [i for i in reversed(self.batches) if self.created_at[i] <= shown]  # newest first
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        page = ids[:limit]
        data = [self._batch(i) for i in page]
        return self._json(
            {
                "object": "list",
                "data": data,
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
                "has_more": len(ids) > len(page),
            }
        )

    async def _cancel(self, request):
        batch_id = request.match_info["id"]
        if batch_id not in self.batches:
            return self._error(404, f"No batch found with id '{batch_id}'.", "id")
        b = self.batches[batch_id]
        if b["status"] in FINAL:
            return self._error(409, f"Cannot cancel a batch with status '{b['status']}'.")
        self._event("cancel", batch_id)
        with self.lock:
            b.update(status="cancelling", cancelling_at=int(time.time()))
        self._tasks[batch_id].cancel()
        self._finish(batch_id, [("cancelled", {"custom_id": c}) for c in self.lines_of[batch_id]], "cancelled")
        return self._json(self._batch(batch_id))

    # --- everything else: the model server itself --------------------------------------------------------

    async def _forward(self, request):
        from aiohttp import web

        raw = await request.read()
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            with self.lock:
                self.direct[item_of(json.loads(raw))] += 1
        url = self.upstream.rsplit("/v1", 1)[0] + request.path_qs
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        async with self.session.request(request.method, url, data=raw or None, headers=headers) as r:
            body = await r.read()
            return web.Response(body=body, status=r.status, content_type="application/json")
