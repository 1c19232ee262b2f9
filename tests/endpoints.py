"""Real endpoints for the tests: vLLM's OpenAI-compatible server on loopback, and a loopback proxy in
front of it that injects faults with a fixed seed and counts what each item was sent and answered.

The proxy speaks HTTP/1.1 itself (keep-alive, Content-Length bodies) so that it can fail the way
networks and providers do: a 429 with Retry-After, a 500 or 503, an answer slower than the client's
timeout, a connection dropped without an answer, a 200 whose JSON body is cut off, and a 200 whose
logprobs were stripped (as some proxies and providers do). It can also enforce a rate limit of R
requests a second, answering 429 beyond it, as a provider's limit does. Everything else it forwards
to the real server unchanged.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("429", "500", "503", "timeout", "drop", "truncated", "strip_logprobs")
# What the engine's log and meta call each fault's retry (engine.endpoint.policy causes).
CAUSE = {
    "429": "429",
    "500": "500",
    "503": "503",
    "timeout": "timeout",
    "drop": "connection",
    "truncated": "truncated",
    "strip_logprobs": "incomplete",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    """`python -m vllm.entrypoints.openai.api_server` serving one model on loopback (about 75 s to start
    on 2 busy cores); its own process group, stopped at exit."""

    def __init__(
        self, model: str, log_path: Path, max_model_len: int = 1024, extra: tuple = (), engine_process: bool = False
    ):
        """`engine_process`: vLLM's engine core in a process of its own, as a served model runs (the
        benches); else inside the server's (the tests: it starts in a third of the time, and serves
        a few hundred requests no slower to matter)."""
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        # The engine core in the server's process: ready in 52-78 s where a process of its own took 246 s
        # on the same loaded 2 cores (a start each, one after the other); its steps then hold the
        # server's event loop, so a bench of throughput gives it its own process.
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if engine_process else "0"
        env.pop("CUDA_VISIBLE_DEVICES", None)
        self.log = open(log_path, "w")  # noqa: SIM115 - the server writes to it until stop()
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-model-len",
            str(max_model_len),
            "--dtype",
            "float32",
            "--gpu-memory-utilization",
            "0.1",
            "--enforce-eager",
            "--disable-uvicorn-access-log",
            *extra,
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait(self, timeout: float = 600) -> VllmServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server for {self.model} exited: {Path(self.log.name).read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"vLLM server for {self.model} did not start in {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


class RunningServer:
    """A server started elsewhere (GENJUDGE_TEST_SERVERS, or another module's), by its URL."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")


# One vLLM server per model for a whole pytest run: whichever worker asks first starts it, the others
# use it. The tests marked `servers` are the only ones that may ask (USERS, written when the
# workers have collected); the worker that ends the last of them stops the servers, since an idle
# server still takes about 2 CPU-s a minute from the rest of the run. The pytest process that started
# the workers stops whatever is left at its end (conftest.py). A start costs 50-70 CPU-s and 75-150 s
# on 2 cores; three modules ask for one.
SERVER_DIR_ENV = "GENJUDGE_TEST_SERVER_DIR"
USERS, DONE = "marked-tests.list", "ended-tests.list"  # not *.json: those name the servers


def register_users(root: Path, nodeids: list[str]) -> None:
    """The run's tests marked `servers` (every worker collects the same ones; the first writes them)."""
    path = root / USERS
    if not path.exists():
        tmp = root / f"{USERS}.{os.getpid()}"
        tmp.write_text(json.dumps(sorted(nodeids)))
        os.replace(tmp, path)


def marked_tests(root: Path) -> set[str] | None:
    """The run's tests marked `servers` (None until the collection wrote them)."""
    path = root / USERS
    return set(json.loads(path.read_text())) if path.exists() else None


def current_test() -> str:
    """The node id of the test running now (pytest's PYTEST_CURRENT_TEST, less its phase)."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def user_finished(root: Path, nodeid: str) -> float | None:
    """Notes that test `nodeid` ended; where it was the last of the `servers` tests, stops the
    servers and returns the CPU seconds of those this process started (reaped here: not the test's
    own). None where the servers stay; a test not marked `servers` changes nothing."""
    users = marked_tests(root)
    if users is None or nodeid not in users:
        return None
    with open(root / "done.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(root / DONE, "a") as f:
            f.write(nodeid + "\n")
        if not users <= set((root / DONE).read_text().splitlines()):
            return None
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        stop_shared_servers(root)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


# The shared servers this process started, held until it has waited for them: a Popen dropped while its
# process runs is reaped by whichever Popen this process makes next (subprocess._cleanup), and the
# server's CPU (60-100 CPU-s) would land in that test's line of the CPU log. Any worker may stop them.
_STARTED: list[VllmServer] = []


def reap_stopped_servers() -> float:
    """Waits for the shared servers this process started that have ended (whichever worker stopped
    them) and returns their CPU-s, which the CPU log counts in no test (tests/conftest.py)."""
    total = 0.0
    for server in list(_STARTED):
        try:
            pid, status, usage = os.wait4(server.proc.pid, os.WNOHANG)
        except ChildProcessError:  # waited for already (stop_shared_servers, in this process)
            pid, status, usage = server.proc.pid, 0, None
        if pid:
            server.proc.returncode = os.waitstatus_to_exitcode(status)
            total += usage.ru_utime + usage.ru_stime if usage else 0.0
            _STARTED.remove(server)
    return total


def shared_servers(*models: str) -> tuple:
    """The run's server of each model, those not yet running started together; with
    GENJUDGE_TEST_SERVERS=GEN_URL,JUDGE_URL the servers named there (demo generator, demo judge)."""
    if os.environ.get("GENJUDGE_TEST_SERVERS"):
        named = dict(
            zip(("models/demo-generator", "models/demo-judge"), os.environ["GENJUDGE_TEST_SERVERS"].split(","))
        )
        return tuple(RunningServer(named[m]) for m in models)
    root = Path(os.environ[SERVER_DIR_ENV])
    if (users := marked_tests(root)) is not None and current_test() not in users:
        raise RuntimeError(
            f"{current_test()} asks for a shared vLLM server but is not marked `servers` "
            "(pytest.mark.servers): the servers stop once the marked tests have ended"
        )
    names = {m: m.strip("/").replace("/", "_") for m in models}
    locks = []
    try:
        for m in sorted(set(models)):  # one order for every worker: no two wait for each other
            lock = open(root / f"{names[m]}.lock", "w")  # noqa: SIM115 - held until the servers are up
            fcntl.flock(lock, fcntl.LOCK_EX)
            locks.append(lock)
        started = {
            m: VllmServer(m, root / f"{names[m]}.log") for m in set(models) if not (root / f"{names[m]}.json").exists()
        }
        _STARTED.extend(started.values())
        for m, server in started.items():
            server.wait()
            server.log.close()  # the server keeps writing to its own descriptor
            info = {"url": server.url, "pgid": server.proc.pid}
            (root / f"{names[m]}.json").write_text(json.dumps(info))
        servers = {m: RunningServer(json.loads((root / f"{names[m]}.json").read_text())["url"]) for m in models}
    finally:
        for lock in locks:
            lock.close()
    for m, server in servers.items():
        try:
            urllib.request.urlopen(f"{server.url}/models", timeout=10).close()
        except OSError as e:
            log = root / f"{names[m]}.log"
            raise RuntimeError(
                f"the shared vLLM server for {m} stopped answering ({e}): {log.read_text()[-3000:]}"
            ) from e
    return tuple(servers[m] for m in models)


def zombie(pid: int) -> bool:
    """Whether `pid` has ended and waits for its parent to wait for it."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_shared_servers(root: Path) -> None:
    """Stop every server `shared_servers` started under `root` (each its own process group)."""
    groups = []
    for info in root.glob("*.json"):
        pgid = json.loads(info.read_text())["pgid"]
        try:
            os.killpg(pgid, signal.SIGTERM)
            groups.append(pgid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    for pgid in groups:
        while time.monotonic() < deadline:
            ended = zombie(pgid)  # another worker's waits for that worker (reap_stopped_servers)
            try:  # a server this process started is its child: reaped here, else it lingers as a zombie
                os.waitpid(pgid, os.WNOHANG)
            except ChildProcessError:
                pass
            if ended:
                break
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def item_of(body: dict) -> str:
    """Which item a request is for: its messages and its seed (a sample's own)."""
    return hashlib.sha256(json.dumps([body.get("messages"), body.get("seed")], sort_keys=True).encode()).hexdigest()[
        :16
    ]


class FaultProxy:
    """A loopback proxy to `upstream` (an http://host:port/v1 URL). `rate` of the requests for items
    (`spare(body)` true: never faulted, e.g. a capability probe) get one of `faults`, drawn with `seed`.
    `limit`: requests a second it lets through (a sliding second), 429 beyond. `delay`: seconds added
    to every answer. `key`: the bearer token it requires (401 otherwise). `always`: items answered 500
    every time (a request no retry saves)."""

    def __init__(
        self,
        upstream: str,
        rate: float = 0.0,
        faults=FAULTS,
        seed: int = 0,
        limit: float | None = None,
        delay: float = 0.0,
        timeout_delay: float = 3.0,
        retry_after: str = "1",
        key: str | None = None,
        spare=None,
        always: set | None = None,
        echo: bool = False,
    ):
        self.upstream = upstream.rstrip("/")
        self.rate, self.faults, self.limit, self.delay = rate, tuple(faults), limit, delay
        self.timeout_delay, self.retry_after, self.key = timeout_delay, retry_after, key
        self.spare = spare or (lambda body: False)
        self.always = always if always is not None else set()  # items answered 500 every time
        self.echo = echo  # every answer a 502 that repeats the request's headers, as some proxies do
        self.rng = random.Random(seed)
        self.requests: Counter = Counter()  # item -> requests received
        self.answered: Counter = Counter()  # item -> complete 200 answers written
        self.injected: Counter = Counter()  # fault -> times injected
        self.admitted: deque = deque()  # times of requests let through (rate limit)
        self.events: list = []  # (monotonic time, item, what)
        self.auth_seen: Counter = Counter()
        self.busy = 0  # requests being handled (a killed client's among them, until they are answered)
        self.lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    # --- plumbing -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        import aiohttp

        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", self.port)

    def stop(self) -> None:
        async def close():
            self.server.close()
            await self.session.close()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until no request is being handled: those of a client killed while they were in flight
        are still answered (and counted) by the proxy after the client is gone."""
        deadline = time.monotonic() + timeout
        while self.busy:
            assert time.monotonic() < deadline, f"{self.busy} requests still handled after {timeout} s"
            time.sleep(0.05)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.answered.clear()
            self.injected.clear()
            self.events.clear()

    # --- HTTP/1.1 ------------------------------------------------------------------------------------

    async def _connection(self, reader, writer) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                with self.lock:
                    self.busy += 1
                try:
                    keep = await self._handle(method, path, headers, body, writer)
                finally:
                    with self.lock:
                        self.busy -= 1
                if not keep or headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _write(self, writer, status: int, payload: bytes, extra: dict | None = None):
        reason = {
            200: "OK",
            401: "Unauthorized",
            429: "Too Many Requests",
            500: "Internal Server Error",
            503: "Service Unavailable",
        }
        head = f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
        head += f"content-length: {len(payload)}\r\n"
        for k, v in (extra or {}).items():
            head += f"{k}: {v}\r\n"
        writer.write(head.encode() + b"\r\n" + payload)
        await writer.drain()

    def _error(self, status: int, message: str) -> bytes:
        return json.dumps({"error": {"message": message, "type": "injected", "code": status}}).encode()

    async def _forward(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        url = self.upstream.rsplit("/v1", 1)[0] + path
        async with self.session.request(
            method, url, data=body or None, headers={"content-type": "application/json"}
        ) as r:
            return r.status, await r.read()

    async def _handle(self, method, path, headers, raw: bytes, writer) -> bool:
        if self.echo:
            message = f"bad gateway: upstream refused {method} {path} with headers {json.dumps(headers)}"
            await self._write(writer, 502, json.dumps({"error": {"message": message, "code": 502}}).encode())
            return True
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            # As providers do, the refusal repeats what it was given: the client must not pass it on.
            given = headers.get("authorization", "").removeprefix("Bearer ")
            await self._write(writer, 401, self._error(401, f"Incorrect API key provided: {given}"))
            return True
        with self.lock:
            self.auth_seen[headers.get("authorization", "")[:7]] += 1
        if method != "POST" or not path.endswith("/chat/completions"):
            status, payload = await self._forward(method, path, raw)
            await self._write(writer, status, payload)
            return True
        body = json.loads(raw)
        item = item_of(body)
        fault = None
        with self.lock:
            self.requests[item] += 1
            now = time.monotonic()
            if self.limit is not None:
                while self.admitted and now - self.admitted[0] >= 1.0:
                    self.admitted.popleft()
                if len(self.admitted) >= self.limit:
                    wait = 1.0 - (now - self.admitted[0])
                    fault = ("rate_limit", wait)
                else:
                    self.admitted.append(now)
            if fault is None and item in self.always:
                fault = ("500", None)
            if fault is None and not self.spare(body) and self.rng.random() < self.rate:
                # Stripping logprobs is a fault only where the request asked for them.
                kinds = [f for f in self.faults if f != "strip_logprobs" or body.get("logprobs")]
                fault = (self.rng.choice(kinds), None)
            if fault is not None:
                self.injected[fault[0]] += 1
            self.events.append((now, item, fault[0] if fault else "ok"))
        if self.delay:
            await asyncio.sleep(self.delay)
        kind = fault[0] if fault else None
        if kind == "rate_limit":
            hint = {"retry-after": str(max(1, round(fault[1] + 0.5))), "retry-after-ms": str(int(fault[1] * 1000) + 1)}
            await self._write(writer, 429, self._error(429, "rate limit reached"), hint)
            return True
        if kind == "429":
            await self._write(writer, 429, self._error(429, "rate limit reached"), {"retry-after": self.retry_after})
            return True
        if kind in ("500", "503"):
            await self._write(writer, int(kind), self._error(int(kind), "injected server error"))
            return True
        if kind == "timeout":
            await asyncio.sleep(self.timeout_delay)
            return False
        if kind == "drop":
            writer.transport.abort()
            return False
        status, payload = await self._forward(method, path, raw)
        if status == 200 and kind == "strip_logprobs":
            data = json.loads(payload)
            for choice in data.get("choices", []):
                choice["logprobs"] = None
            payload = json.dumps(data).encode()
        if status == 200 and kind == "truncated":  # a complete HTTP answer whose JSON is cut off
            await self._write(writer, 200, payload[: len(payload) // 2])
            return True
        await self._write(writer, status, payload)
        if status == 200 and kind != "strip_logprobs":
            with self.lock:
                self.answered[item] += 1
        return True
