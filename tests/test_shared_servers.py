"""The run's shared vLLM servers (tests/endpoints.py) stop when the last test marked `servers` ends,
and a test that is not marked cannot ask for them. A `sleep` in its own process group stands in for
a server here: what is checked is which process group is stopped, and when."""

import gc
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import endpoints
import psutil
import pytest
from endpoints import (
    _STARTED,
    SERVER_DIR_ENV,
    USERS,
    current_test,
    free_port,
    reap_stopped_servers,
    register_users,
    shared_servers,
    user_finished,
    zombie,
)


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_last_marked_test_to_end_stops_the_servers(tmp_path):
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        (tmp_path / "models_demo-judge.json").write_text(json.dumps({"url": "http://x/v1", "pgid": proc.pid}))
        register_users(tmp_path, ["t.py::a", "t.py::b[x y]"])
        register_users(tmp_path, ["t.py::c"])  # another worker's copy of the same collection: the first stays
        assert json.loads((tmp_path / USERS).read_text()) == ["t.py::a", "t.py::b[x y]"]
        assert user_finished(tmp_path, "t.py::unmarked") is None
        assert user_finished(tmp_path, "t.py::a") is None
        assert user_finished(tmp_path, "t.py::a") is None  # the same test twice is still one of two
        assert proc.poll() is None and alive(proc.pid)
        start = time.monotonic()
        assert user_finished(tmp_path, "t.py::b[x y]") >= 0.0  # the CPU-s it reaped
        assert not alive(proc.pid)
        assert time.monotonic() - start < 10  # its own child reaped, not waited on until the deadline
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_an_unmarked_test_asking_for_a_server_is_told_to_mark_itself(tmp_path, monkeypatch):
    register_users(tmp_path, ["t.py::a"])
    monkeypatch.setenv(SERVER_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("GENJUDGE_TEST_SERVERS", raising=False)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::b (setup)")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"t\.py::b asks for a shared vLLM server but is not marked `servers`"):
        shared_servers("models/demo-judge")
    assert time.monotonic() - start < 5 and not list(tmp_path.glob("*.log"))  # refused before any start


def test_this_run_wrote_its_marked_tests():
    """In this very run: the collection wrote the selected `servers` tests, and this one is not among them."""
    root = os.environ.get(SERVER_DIR_ENV)
    if not root or not os.path.isdir(root):
        pytest.skip("no shared-server directory in this run")
    with open(os.path.join(root, USERS)) as f:
        names = json.load(f)
    marked = (
        "tests/test_endpoints.py::",
        "tests/test_endpoint_batch.py::",
        "tests/test_slurm.py::",
        "tests/test_rubric_workflow.py::test_an_endpoint_judge_on_vllms_server",
    )
    assert all(n.startswith(marked) for n in names), [n for n in names if not n.startswith(marked)]
    assert current_test() not in names and current_test().startswith("tests/test_shared_servers.py::")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class StandIn(endpoints.VllmServer):
    """Stands in for VllmServer: a process of its own group that burns 0.3 CPU-s, then answers GET
    /models with 200 (a file of that name, served by http.server); waited for as a server is."""

    def __init__(self, model, log_path, **_):
        self.model = model
        served = Path(log_path).with_suffix(".served")
        served.mkdir()
        (served / "models").write_text("{}")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "w")  # noqa: SIM115 - closed by shared_servers, as a server's is
        burn = (
            "import sys, time, http.server, functools\n"
            "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])\n"
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), handler).serve_forever()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", burn, str(port), str(served)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_a_server_another_worker_stopped_is_waited_for_by_its_starter_in_no_tests_line(tmp_path, monkeypatch):
    """A server shared_servers started here (StandIn) and another worker stopped: the next Popen here
    does not wait for it, which would put its CPU in the line of whatever test ran then; the CPU log's
    hook does, with reap_stopped_servers, before the next test starts."""
    monkeypatch.setattr(endpoints, "VllmServer", StandIn)
    monkeypatch.setenv(SERVER_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("GENJUDGE_TEST_SERVERS", raising=False)
    register_users(tmp_path, [current_test()])
    (server,) = shared_servers("models/demo-judge")
    pid = json.loads((tmp_path / "models_demo-judge.json").read_text())["pgid"]
    del server
    gc.collect()  # the handles shared_servers made are gone, as they are once a test ends
    try:
        assert sum(psutil.Process(pid).cpu_times()[:2]) >= 0.3  # it burned, then answered
        os.killpg(pid, signal.SIGTERM)  # as another worker's stop_shared_servers does: no wait here
        while not zombie(pid):
            time.sleep(0.05)
        before = children_cpu()
        subprocess.run(["true"], check=True)  # a test's next Popen in this worker
        assert children_cpu() - before < 0.2 and os.path.exists(f"/proc/{pid}")  # not waited for by it
        assert reap_stopped_servers() >= 0.3
        assert not os.path.exists(f"/proc/{pid}") and not [s for s in _STARTED if s.proc.pid == pid]
    finally:
        if os.path.exists(f"/proc/{pid}"):
            os.killpg(pid, signal.SIGKILL)
        _STARTED[:] = [s for s in _STARTED if s.proc.pid != pid]
