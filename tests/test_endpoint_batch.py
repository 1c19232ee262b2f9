"""engine: openai with `endpoint.batch: true`: a judge's requests as the provider's batch files, through
the real snakemake command line, against a loopback stand-in of the provider's file and batch
endpoints whose lines the real vLLM server answers (tests/batch_standin.py).

A batched judge gives the verdicts of the same judge's direct requests, at the batch discount; lines the
window left undone or that failed go into the next file and end with results, each item stored once; a
judge killed while its batch runs, or before it learnt its batch's id, polls that batch on the rerun
and never uploads or submits again."""

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import psutil
import pytest
from batch_standin import BatchStandIn
from conftest import Workflow, clean_env, new_workflow, wait_until
from endpoints import shared_servers

pytestmark = [pytest.mark.workflow, pytest.mark.vllm, pytest.mark.servers]

JUDGE = "models/demo-judge"
N = 44  # the demo's questions
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}  # batch_discount: the schema's 0.5
POLL = 0.2  # endpoint.batch_poll_seconds
CACHE = "results/.cache-batch"


@pytest.fixture(scope="module")
def judge_server():
    """vLLM's OpenAI server for the demo judge, the run's shared one (tests/endpoints.py shared_servers)."""
    return shared_servers(JUDGE)[0]


@pytest.fixture(scope="module")
def wf(tmp_path_factory, built_models) -> Workflow:
    return new_workflow(tmp_path_factory.mktemp("endpoint-batch"), built_models)


def judge(url: str, **endpoint) -> dict:
    return {"model": JUDGE, "engine": "openai", "price": PRICE, "endpoint": {"base_url": url, **endpoint}}


def batched(standin: BatchStandIn, **endpoint) -> dict:
    return judge(standin.url, batch=True, batch_poll_seconds=POLL, **endpoint)


def config(wf: Workflow, run: str, judges: dict) -> Path:
    """The demo study (its generator in process) with `judges`; one item cache for every run here."""
    return wf.write_config(f"{run}.yaml", run=run, shards=1, cache_dir=CACHE, judges=judges)


def raw(wf, run, name) -> pd.DataFrame:
    return pd.read_parquet(wf.results(run) / "judge" / name / "raw.parquet").sort_values("id", ignore_index=True)


def meta(wf, run, name) -> dict:
    return json.loads((wf.results(run) / "judge" / name / "raw.meta.json").read_text())


def stored(wf) -> tuple[Counter, dict]:
    """(records per key, the last record of each key) in the judges' item store logs."""
    counts, records = Counter(), {}
    for log in (wf.path / CACHE / "judge" / "logs").glob("*.jsonl"):
        for line in log.read_text().splitlines()[1:]:
            if line.strip():
                rec = json.loads(line)
                counts[rec["key"]] += 1
                records[rec["key"]] = rec
    return counts, records


@pytest.fixture(scope="module")
def study(wf, judge_server):
    """One run: the demo judge asked directly, and the same judge through batch files, where the
    stand-in lets a quarter of the lines expire and fails a tenth with a 500 (drawn with a seed),
    writes its results in shuffled order, drops the connection of the first submission instead of
    answering it and fails three in ten of the looks, lists and downloads with a 429, 500 or 503."""
    standin = BatchStandIn(
        judge_server.url, expire=0.25, fail=0.1, seed=3, shuffle=True, drop_create=True, api_faults=0.3
    )
    try:
        judges = {"direct": judge(judge_server.url), "batched": batched(standin)}
        cfg = config(wf, "batch", judges)
        t0 = time.monotonic()
        wf.run("--cores", "2", "--configfile", cfg, env=clean_env())
        standin.seconds = time.monotonic() - t0
        yield standin
    finally:
        standin.stop()


# --- results ----------------------------------------------------------------------------------------


def test_batched_verdicts_equal_the_same_judges_direct_ones(wf, study):
    a, b = raw(wf, "batch", "batched"), raw(wf, "batch", "direct")
    assert len(a) == N and a["judge_output"].notna().all()
    assert a["id"].tolist() == b["id"].tolist()
    assert a["judge_output"].tolist() == b["judge_output"].tolist()
    assert a["judge_n_prompt_tokens"].tolist() == b["judge_n_prompt_tokens"].tolist()
    assert meta(wf, "batch", "batched")["endpoint"]["batch"] is True
    assert meta(wf, "batch", "direct")["endpoint"]["batch"] is False
    # The direct judge sent no batch; the batched one sent its items only in batch files.
    assert study.direct and sum(study.direct.values()) == 1  # the capability probe, nothing else


def test_expired_and_failed_lines_go_into_the_next_batch_and_each_item_is_stored_once(wf, study):
    retried = study.expired | study.failed
    assert study.expired and study.failed, "the seed drew no expired or no failed line"
    first, second = study.created_ids()  # two batches, no third
    assert study.status(first) == "expired" and study.status(second) == "completed"
    assert study.uploads == 2 and study.creations == 2
    assert set(study.lines_of[second]) == retried
    assert len(study.batched_lines) == N
    assert all(n == (2 if c in retried else 1) for c, n in study.batched_lines.items())
    assert study.uploaded_lines == study.batched_lines  # every uploaded file became one batch

    e = meta(wf, "batch", "batched")["endpoint"]
    assert e["batches"] == [first, second]
    assert e["completed"] == N and e["requests"] == N + len(retried) + e["probe_requests"] and e["given_up"] == {}
    assert e["retries"] == {"expired": len(study.expired), "500": len(study.failed)}

    counts, records = stored(wf)
    mine = {k: r for k, r in records.items() if k in study.batched_lines}  # custom_id: the item's key
    assert len(mine) == N and all(counts[k] == 1 for k in mine)
    assert {r["batch_id"] for k, r in mine.items() if k in retried} == {second}
    assert {r["batch_id"] for k, r in mine.items() if k not in retried} == {first}


def test_the_batch_apis_failures_are_waited_out_and_a_lost_submission_answer_found_again(wf, study):
    assert sum(study.injected.values()) >= 3 and study.listed >= 1
    log = (wf.path / "logs" / "batch" / "judge" / "batched" / "0-of-1.log").read_text()
    assert "found batch" in log  # the first batch, whose id the client never received, by its file
    # Each fault was waited out and logged, and the submission's lost answer with them.
    assert log.count("the batch API failed") == sum(study.injected.values()) + 1


def test_batched_requests_cost_the_batch_discount(wf, study):
    _, records = stored(wf)
    batch_cost = {r["id"]: r["cost_usd"] for k, r in records.items() if k in study.batched_lines}
    direct_cost = {r["id"]: r["cost_usd"] for k, r in records.items() if k not in study.batched_lines}
    assert len(batch_cost) == len(direct_cost) == N
    for i, cost in direct_cost.items():
        assert cost > 0 and batch_cost[i] == pytest.approx(0.5 * cost, rel=1e-9)
    a, b = meta(wf, "batch", "batched")["endpoint"], meta(wf, "batch", "direct")["endpoint"]
    assert a["prompt_tokens"] == b["prompt_tokens"] and a["completion_tokens"] == b["completion_tokens"]
    assert sum(batch_cost.values()) <= a["cost_usd"] < b["cost_usd"]


# --- kill and rerun -------------------------------------------------------------------------------------


def start(wf, cfg, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(cfg)],
            cwd=wf.path,
            env=clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def kill_jobs(proc, script: str) -> int:
    """SIGKILL every job process of the workflow that runs `script`; how many."""
    killed = 0
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if any(script in part for part in child.cmdline()):
                child.send_signal(signal.SIGKILL)
                killed += 1
        except psutil.NoSuchProcess:
            continue
    return killed


def test_a_killed_batch_job_polls_its_batches_again_and_never_resubmits(wf, judge_server, study, tmp_path):
    """Two batched judges killed at once: one while its batch runs (its id recorded), one before the
    provider's answer to its submission arrived (its batch exists, its id was never recorded: found
    again among the provider's batches by its uploaded file). The second's provider leaves the lines
    its window did not reach out of both result files, as some providers do: they go into a new file.
    They judge a copy of the study's run (its generations made: only the judge jobs run), with the
    study's direct judge to compare with."""
    wf = wf.copy(tmp_path)
    held = BatchStandIn(judge_server.url, hold=True, seed=5)
    unseen = BatchStandIn(judge_server.url, hold=True, hold_create=True, expire=0.2, expired_lines="missing", seed=6)
    try:
        cfg = config(wf, "batch", {"held": batched(held), "unseen": batched(unseen)})
        proc = start(wf, cfg, tmp_path / "first.log")
        try:
            # Polled once: the job holds the batch's id. Created: the job waits for the answer.
            wait_until(lambda: sum(held.retrieved.values()) >= 1 and unseen.creations == 1, "both batches exist", proc)
            assert kill_jobs(proc, "judge.py") == 2
            proc.wait(300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode != 0
        (held_id,), (unseen_id,) = held.created_ids(), unseen.created_ids()
        assert held.status(held_id) == unseen.status(unseen_id) == "in_progress"
        looked = held.retrieved[held_id]

        proc = start(wf, cfg, tmp_path / "rerun.log")
        try:
            wait_until(
                lambda: held.retrieved[held_id] > looked and unseen.retrieved[unseen_id] > 0,
                "the rerun polls both batches",
                proc,
            )
            assert held.status(held_id) == unseen.status(unseen_id) == "in_progress"
            held.release()
            unseen.release()
            proc.wait(300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, (tmp_path / "rerun.log").read_text()[-4000:]
    finally:
        held.stop()
        unseen.stop()

    direct = raw(wf, "batch", "direct")["judge_output"].tolist()
    # One upload and one batch in all: the rerun polled the batch and submitted nothing.
    assert held.uploads == 1 and held.creations == 1
    assert len(held.batched_lines) == N and set(held.batched_lines.values()) == {1}
    e = meta(wf, "batch", "held")["endpoint"]
    assert e["batches"] == [held_id] and e["requests"] == e["probe_requests"] and e["completed"] == N
    assert e["retries"] == {}
    assert raw(wf, "batch", "held")["judge_output"].tolist() == direct
    # The adopted batch was polled, not resubmitted: the second file holds only the lines it left undone.
    assert unseen.listed >= 1 and unseen.expired
    assert unseen.status(unseen_id) == "expired"
    assert unseen.uploads == 2 and unseen.creations == 2
    first, second = unseen.created_ids()
    assert first == unseen_id and set(unseen.lines_of[second]) == unseen.expired
    assert len(unseen.batched_lines) == N
    assert all(n == (2 if c in unseen.expired else 1) for c, n in unseen.batched_lines.items())
    e = meta(wf, "batch", "unseen")["endpoint"]
    assert e["batches"] == [unseen_id, second] and e["completed"] == N
    assert e["requests"] - e["probe_requests"] == len(unseen.expired) and e["retries"] == {
        "expired": len(unseen.expired)
    }
    assert raw(wf, "batch", "unseen")["judge_output"].tolist() == direct
    counts, _ = stored(wf)
    assert all(counts[k] == 1 for k in {*held.batched_lines, *unseen.batched_lines})


# --- the stand-in answers as the provider does ----------------------------------------------------------


def test_the_standin_speaks_the_batch_api_as_the_openai_client_reads_it():
    """What the tests above rely on and the job does not exercise: pages of the batch list, a cancel,
    and a file the provider's validation refuses (no line reaches a model server)."""
    from openai import OpenAI

    standin = BatchStandIn("http://127.0.0.1:9/v1", hold=True)
    try:
        client = OpenAI(base_url=standin.url, api_key="none", max_retries=0)

        def line(cid, url="/v1/chat/completions"):
            body = {"model": JUDGE, "messages": [{"role": "user", "content": cid}], "max_tokens": 1}
            return json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}) + "\n"

        def submit(text):
            upload = client.files.create(file=("in.jsonl", text.encode()), purpose="batch")
            assert client.files.retrieve(upload.id).bytes == len(text.encode())
            return client.batches.create(
                input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
            )

        ids = [submit(line(f"a{i}") + line(f"b{i}")).id for i in range(3)]
        assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # newest first, every page
        first = client.batches.list(limit=2)
        assert first.has_more and [b.id for b in first.data] == ids[:0:-1]

        cancelled = client.batches.cancel(ids[0])
        assert cancelled.status == "cancelled" and cancelled.output_file_id is None
        errors = [json.loads(x) for x in client.files.content(cancelled.error_file_id).text.splitlines()]
        assert sorted(e["custom_id"] for e in errors) == ["a0", "b0"]
        assert {e["error"]["code"] for e in errors} == {"batch_cancelled"} and all(
            e["response"] is None for e in errors
        )

        refused = submit(line("c") + line("c") + line("d", url="/v1/embeddings"))
        deadline = time.monotonic() + 10
        while client.batches.retrieve(refused.id).status != "failed":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        why = client.batches.retrieve(refused.id).errors.data
        assert [(e.code, e.line) for e in why] == [("duplicate_custom_id", 2), ("invalid_url", 3)]
    finally:
        standin.stop()


def test_a_file_or_batch_the_provider_refuses_stops_the_job_naming_why(tmp_path):
    """A batch that ends `failed` (the provider's checks refused the file, or its queue was full) would
    fail again as another file: the sender stops with the provider's errors instead of resubmitting,
    and so does a refused upload. Nothing is stored; no batch stays live in the state."""
    from genjudge.config.specs import spec_for
    from genjudge.engine.endpoint.batch import BatchSender
    from genjudge.engine.endpoint.cost import Budget
    from genjudge.engine.endpoint.settings import Endpoint
    from genjudge.store.item_store import ItemStore

    def send(standin):
        endpoint = {"base_url": standin.url, "batch": True, "batch_poll_seconds": 0.05}
        ep = Endpoint.of(spec_for("judge", model=JUDGE, engine="openai", endpoint=endpoint))
        bodies = [
            {"model": JUDGE, "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 1} for i in range(3)
        ]
        stored = {}
        store = ItemStore(tmp_path / "store", "w")
        sender = BatchSender(
            ep,
            Budget(ep.price, None, True),
            stored.__setitem__,
            None,
            list("abc"),
            "judge",
            store,
            keys=["k0", "k1", "k2"],
        )
        return sender.run(bodies, "sk-none"), stored

    rejecting = BatchStandIn("http://127.0.0.1:9/v1", reject="token_limit_exceeded")
    refusing = BatchStandIn("http://127.0.0.1:9/v1", refuse_uploads=401)
    try:
        report, stored = send(rejecting)
        assert rejecting.uploads == rejecting.creations == 1  # not submitted again
        assert "token_limit_exceeded" in report.refused and rejecting.created_ids()[0] in report.refused
        assert stored == {} and report.unsent == [0, 1, 2] and report.retries == {}
        assert not list((tmp_path / "store" / "batches").glob("*.json"))  # its state: done/, nothing to poll
        assert len(list((tmp_path / "store" / "batches" / "done").glob("*.json"))) == 1

        report, stored = send(refusing)
        assert "HTTP 401" in report.refused and "Incorrect API key" in report.refused
        assert stored == {} and report.unsent == [0, 1, 2] and refusing.uploads == 0
    finally:
        rejecting.stop()
        refusing.stop()
