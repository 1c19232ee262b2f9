"""engine: openai at the edges where money or secrets escape, against a loopback stand-in that behaves as
real providers and proxies sometimes do (tests/provider_standin.py): a 502 that echoes the request's
headers, a redirect to another origin, answers without usage or with null counts, reasoning billed above
max_tokens, `n` choices, a proxy that strips logprobs, a budget near its end, two live processes of one
job, a millisecond's Retry-After-Ms, withheld answers, reasoning traces sent apart, a verdict in
markdown, cached and reasoning tokens priced as providers bill them, and batches across shard layouts."""

import json
import logging
import subprocess
import sys
import time
import traceback

import pytest
from conftest import wait_until
from judges import ROOT
from provider_standin import Provider, Reply, echoing_502, prompt_of, usage

from genjudge import config as wfconfig
from genjudge.config.specs import spec_for
from genjudge.engine.endpoint import client as endpoint_client
from genjudge.engine.endpoint.cost import Budget
from genjudge.engine.endpoint.requests import LogprobVerdict, read_verdict, result
from genjudge.engine.endpoint.run import EndpointPromptSet, complete_endpoint
from genjudge.engine.endpoint.settings import Endpoint, Price
from genjudge.errors import InputError
from genjudge.models.endpoints import check_url
from genjudge.store.item_store import ItemStore

KEY = "sk-edge-sentinel-9f3b2c71"
HEADER_SECRET = "gw-token-sentinel-55ad"
VERDICT = LogprobVerdict(("CORRECT", "INCORRECT"), "VERDICT:")
PRICED = {"price": {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}


@pytest.fixture
def provider():
    made = []

    def make(answer=None):
        made.append(Provider(answer))
        return made[-1]

    yield make
    for p in made:
        p.stop()


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("EDGE_KEY", KEY)
    monkeypatch.setenv("EDGE_GATEWAY", HEADER_SECRET)


def job(url, tmp_path, texts, values=None, writer="w", role="generator", verdict=None, **endpoint):
    spec = spec_for(
        role,
        model="gpt-4.1-2025-04-14",
        engine="openai",
        max_new_tokens=8,
        endpoint={"base_url": url, "check_capabilities": False, "max_wait": 3, "api_key_env": "EDGE_KEY", **endpoint},
        **(values or {}),
    )
    store = ItemStore(tmp_path / "store", writer)
    ids = [f"q{i}" for i in range(len(texts))]
    kind = "judge" if role == "judge" else "generate"
    pset = EndpointPromptSet(spec, kind, verdict=verdict, where=f"{role}s.edge")
    return complete_endpoint(pset, texts, ids, store, "shard 0", None), store


def everything_said(exc: BaseException, caplog) -> str:
    return "".join(traceback.format_exception(exc)) + caplog.text


# --- secrets ---------------------------------------------------------------------------------------


def test_a_probe_that_echoes_the_key_and_the_headers_reaches_no_message_nor_log(provider, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    echo = provider(echoing_502)
    gateway = {"X-Gateway-Token": {"env": "EDGE_GATEWAY"}}
    with pytest.raises(InputError, match="did not answer the capability probe") as err:
        job(echo.url, tmp_path, ["a"], check_capabilities=True, extra_headers=gateway)
    # The proxy did see both secrets, and repeated them in its answer.
    assert echo.headers[0]["authorization"] == f"Bearer {KEY}" and echo.headers[0]["x-gateway-token"] == HEADER_SECRET
    said = everything_said(err.value, caplog)
    assert KEY not in said and HEADER_SECRET not in said and "[redacted]" in said
    # The same proxy in front of the items: their reasons (what the metas, parquet and report show) hold neither.
    c, _ = job(echo.url, tmp_path, ["a", "b"], extra_headers=gateway, max_attempts=2)
    reasons = json.dumps([c.incomplete, c.info])
    assert len(c.incomplete) == 2 and "502" in reasons and KEY not in reasons and HEADER_SECRET not in reasons
    assert KEY not in caplog.text and HEADER_SECRET not in caplog.text


def test_a_base_url_with_a_query_or_fragment_is_refused(tmp_path):
    for url in ("https://gw.example.com/v1?key=AIzaSECRET", "https://gw.example.com/v1#frag"):
        with pytest.raises(InputError, match=r"judges.g.endpoint.base_url: .*query string or fragment") as err:
            check_url(url, "judges.g.endpoint", False)
        assert "AIzaSECRET" not in str(err.value) and "extra_headers" in str(err.value)


def test_a_redirect_to_another_origin_is_not_followed(provider, tmp_path):
    elsewhere = provider()
    redirecting = provider(
        lambda body, headers: Reply(
            status=307, body={}, headers={"location": f"{elsewhere.url}/chat/completions?key=AIzaLEAK"}
        )
    )
    with pytest.raises(InputError, match=r"redirects to http://127\.0\.0\.1:\d+/v1/chat/completions") as err:
        job(redirecting.url, tmp_path, ["a", "b"], max_connections=1)
    assert elsewhere.total() == 0 and "AIzaLEAK" not in str(err.value)
    assert ItemStore(tmp_path / "store", "x").load() == {}  # nothing stored under the first URL's key


# --- usage the provider does not report ------------------------------------------------------------


@pytest.mark.parametrize("shape", ["absent", "null counts"])
def test_an_answer_without_usage_is_kept_and_counted_at_its_worst_case(shape, provider, tmp_path):
    bare = None if shape == "absent" else {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}
    p = provider(lambda body, headers: Reply(usage=bare))
    c, store = job(p.url, tmp_path, ["a", "b", "c"], {**PRICED, "max_cost_usd": 5.0})
    e = c.info["endpoint"]
    assert [r["output"] for r in c.results] == ["ok"] * 3 and p.total() == 3
    assert e["usage_missing"] == 3 and e["possibly_billed_usd"] > 0 and e["cost_usd"] == 0
    stored = store.load()
    assert all(r["usage_missing"] and r["possibly_billed_usd"] > 0 and r["cost_usd"] is None for r in stored.values())
    # A rerun sends nothing, and counts what they may have cost.
    c, _ = job(p.url, tmp_path, ["a", "b", "c"], {**PRICED, "max_cost_usd": 5.0})
    assert p.total() == 3 and c.info["endpoint"]["possibly_billed_usd_earlier_attempts"] == pytest.approx(
        e["possibly_billed_usd"]
    )


# --- the worst case and the budget -----------------------------------------------------------------


def test_the_worst_case_covers_n_choices_and_reasoning_billed_above_max_tokens():
    b = Budget(Price(1000.0, 1000.0, 0.5), limit=10.0)
    one = {"messages": [{"role": "user", "content": "q"}], "max_tokens": 10}
    eight = {**one, "n": 8}
    assert b.worst_case(eight) - b.worst_case(one) == pytest.approx(70 * 1000 / 1e6)
    both = {**one, "max_completion_tokens": 50}
    assert b.worst_case(both) == pytest.approx(b.worst_case({**one, "max_tokens": 50}))
    # A probe billed 300 completion tokens for max_tokens 10 (reasoning outside the cap): later worst cases
    # assume it, and the response counts as billed above its bound.
    b.reserve("probe", one)
    b.paid("probe", one, 5, 300, reasoning_tokens=290)
    assert b.over_bound == 1 and b.excess == 290 and b.reasoning_tokens == 290
    assert b.worst_case(one) >= (10 + 290) * 1000 / 1e6


def test_reasoning_billed_above_max_tokens_passes_the_budget_by_at_most_one_request(provider, tmp_path):
    # Every answer bills 400 reasoning tokens beside its max_tokens of 8: $0.00413 each at $10/M, where the
    # first worst cases (max_tokens 8) set aside about $0.0006.
    p = provider(lambda body, headers: Reply(usage=usage(5, 408, reasoning=400)))
    price = {"price": {"input_per_mtok": 10.0, "output_per_mtok": 10.0}}
    budget = 0.05
    texts = [f"item {i}" for i in range(60)]
    c, store = job(p.url, tmp_path, texts, {**price, "max_cost_usd": budget}, max_connections=8)
    e = c.info["endpoint"]
    bill = (5 + 408) * 10 / 1e6
    spent = e["cost_usd"] + e["possibly_billed_usd"]
    assert e["budget_stopped"] and spent <= budget + bill + 1e-9 and spent >= budget - 2 * bill
    assert e["over_bound"] == e["completed"] + e["unkept"] and e["over_reservation"] >= 1
    assert e["reasoning_tokens"] == 400 * e["completed"]
    # The same command again sends nothing more.
    sent = p.total()
    c, _ = job(p.url, tmp_path, texts, {**price, "max_cost_usd": budget}, max_connections=8)
    assert p.total() == sent and c.info["endpoint"]["budget_stopped"]


def test_near_the_end_of_a_small_budget_fewer_requests_fly_rather_than_none(provider, tmp_path):
    p = provider()  # each answer: 5 + 1 tokens, $0.00006 at $10/M
    texts = [f"item {i}" for i in range(100)]
    budget = 0.003
    price = {"price": {"input_per_mtok": 10.0, "output_per_mtok": 10.0}}
    c, _ = job(p.url, tmp_path, texts, {**price, "max_cost_usd": budget}, max_connections=8, check_capabilities=True)
    e = c.info["endpoint"]
    # The in-flight worst cases (max_new_tokens 8 and a token per byte) once held two thirds of this budget
    # back; now the job spends most of it, waiting for answers near the end instead of stopping.
    assert e["budget_stopped"] and 0.85 * budget <= e["cost_usd"] <= budget + 1e-9
    assert e["budget_waits"] > 0
    first = p.total()
    # The same command again: nothing more is sent, not even the probe.
    c, _ = job(p.url, tmp_path, texts, {**price, "max_cost_usd": budget}, max_connections=8, check_capabilities=True)
    assert p.total() == first and c.info["endpoint"]["budget_stopped"]
    # A larger budget goes on, and skips the probe its earlier attempt passed.
    probes = p.requests.get("Reply with one short sentence about the weather.", 0)
    c, _ = job(p.url, tmp_path, texts, {**price, "max_cost_usd": 1.0}, max_connections=8, check_capabilities=True)
    assert p.requests["Reply with one short sentence about the weather."] == probes
    assert all(r is not None for r in c.results) and c.info["endpoint"]["probe"]["skipped"]
    assert max(p.requests[t] for t in texts) == 1


def test_non_finite_numbers_in_the_config_are_refused(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "question": "q?", "answer": "x"}\n')
    base = {"run": "r", "shards": 1, "dataset": {"path": str(data)}}
    judge = {"model": "gpt-4.1-2025-04-14", "engine": "openai", "endpoint": {"base_url": "https://api.example.com/v1"}}
    for value, where in (
        (
            {"judge": {**judge, "price": {"input_per_mtok": float("nan"), "output_per_mtok": 1.0}}},
            "judge.price.input_per_mtok",
        ),
        ({"judge": {**judge, "max_cost_usd": float("inf")}}, "judge.max_cost_usd"),
        ({"generator": {"model": "x", "temperature": float("nan")}}, "generator.temperature"),
        (
            {"judges": {"j": {**judge, "endpoint": {**judge["endpoint"], "timeout": float("-inf")}}}},
            "judges.j.endpoint.timeout",
        ),
    ):
        with pytest.raises(InputError, match=rf"^{where}: (nan|inf|-inf) is not a finite number"):
            wfconfig.validate({**base, **value}, ROOT)


# --- failures that every item would meet -----------------------------------------------------------


def test_a_proxy_that_strips_logprobs_stops_the_job_after_a_few_items(provider, tmp_path):
    plain = provider(lambda body, headers: Reply(content="VERDICT: CORRECT"))  # logprobs asked, none sent
    texts = [f"item {i}" for i in range(40)]
    with pytest.raises(InputError, match=r"5 items in a row failed the same way.*check_capabilities: true") as err:
        job(plain.url, tmp_path, texts, role="judge", verdict=VERDICT, max_connections=4, max_attempts=8)
    assert plain.total() <= 16 and "judges.edge.endpoint.check_capabilities" in str(err.value)  # not 40 x 8


def test_a_millisecond_retry_after_is_floored_and_counts_against_max_attempts(provider, tmp_path):
    limited = provider(
        lambda body, headers: Reply(
            status=429, body={"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"}
        )
    )
    t0 = time.monotonic()
    c, _ = job(limited.url, tmp_path, ["a"], max_attempts=3, max_wait=60)
    assert limited.total() == 3 and time.monotonic() - t0 >= 2 * endpoint_client.policy.BACKOFF_BASE
    assert "gave up after 3 tries" in c.incomplete[0]


# --- two live processes of one job -------------------------------------------------------------------

LIVE_JOB = """
import os, sys
sys.path.insert(0, {tests!r})
from test_endpoint_edges import job
from pathlib import Path
os.environ["EDGE_KEY"] = "k"
job(sys.argv[1], Path(sys.argv[2]), ["slow"])
"""


def test_a_second_live_process_of_the_same_job_is_refused_naming_the_first(provider, tmp_path):
    slow = provider(lambda body, headers: (time.sleep(30), None)[1] if prompt_of(body) == "slow" else None)
    script = tmp_path / "first.py"
    script.write_text(LIVE_JOB.format(tests=str(ROOT / "tests")))
    first = subprocess.Popen([sys.executable, str(script), slow.url, str(tmp_path)], cwd=ROOT)
    try:
        wait_until(lambda: slow.requests.get("slow", 0) >= 1, "the first process sent its request", first, 300)
        with pytest.raises(InputError, match=rf"another live process is this job \(w\): host \S+, pid {first.pid}"):
            job(slow.url, tmp_path, ["slow", "other"])
        assert slow.requests == {"slow": 1}
    finally:
        first.kill()
        first.wait(30)
    c, _ = job(slow.url, tmp_path, ["other"])  # the lock went with the process
    assert c.results[0]["output"] == "ok"


# --- answers the provider withholds, traces it sends apart -------------------------------------------


def withheld(body, headers):
    text = prompt_of(body)
    if text == "filtered":
        return Reply(content=None, finish="content_filter")
    if text == "tools":
        return Reply(content=None, finish="tool_calls", message={"tool_calls": [{"id": "t", "type": "function"}]})
    return None


def test_a_withheld_answer_fails_its_item_or_counts_wrong_never_an_empty_answer(provider, tmp_path):
    p = provider(withheld)
    c, store = job(p.url, tmp_path, ["fine", "filtered", "tools"])
    assert c.results[0]["output"] == "ok" and sorted(c.incomplete) == [1, 2]
    assert "withheld the answer (finish_reason 'content_filter')" in c.incomplete[1] and "tool calls" in c.incomplete[2]
    assert c.info["endpoint"]["filtered"] == 2 and c.info["endpoint"]["given_up"] == {
        "content_filter": 1,
        "tool_calls": 1,
    }
    assert len(store.load()) == 1
    c, store = job(p.url, tmp_path / "wrong", ["fine", "filtered"], on_filtered="count_wrong")
    assert c.results[1]["finish_reason"] == "content_filter" and c.results[1]["output"] == "" and not c.incomplete


def test_a_reasoning_trace_sent_apart_is_kept_and_one_cut_off_stays_open():
    def response(content, finish, trace="think hard"):
        msg = {"role": "assistant", "content": content, "reasoning_content": trace}
        return {"choices": [{"message": msg, "finish_reason": finish}], "usage": usage(5, 9, reasoning=7)}

    done = result(response("42", "stop"), None, False, ("<think>", "</think>"))
    assert done["output"] == "<think>think hard</think>42" and done["reasoning_tokens"] == 7
    cut = result(response(None, "length"), None, False, ("<think>", "</think>"))
    assert cut["output"] == "<think>think hard" and cut["finish_reason"] == "length"


def test_a_verdict_in_markdown_is_read_at_its_label_and_never_at_the_emphasis():
    def choice(tokens):
        content = [
            {"token": t, "logprob": -0.1, "top_logprobs": [{"token": a, "logprob": lp} for a, lp in top]}
            for t, top in tokens
        ]
        return {"logprobs": {"content": content}}

    stars = [(" **", -0.01), (" CORRECT", -5.0)]
    label = [("CORRECT", -0.05), ("INCORRECT", -3.0)]
    out = read_verdict(
        choice([("VERDICT", []), (":", []), (" **", stars), ("CORRECT", label), ("**", [])]), VERDICT, False
    )
    assert out["output"] == "VERDICT: CORRECT" and out["p_correct"] > 0.9
    # A token that is emphasis and label at once is not a label: unparsed, never guessed.
    glued = [("**INC", -0.1), ("**COR", -1.0)]
    out = read_verdict(choice([("VERDICT", []), (":", []), (" **INC", glued), ("ORRECT", [])]), VERDICT, False)
    assert out["p_correct"] is None and out["finish_reason"] == "logprob-unseen"


# --- prices as providers bill them ------------------------------------------------------------------


def test_cached_reasoning_and_batch_tokens_cost_what_a_hand_computation_says(provider, tmp_path):
    # 1,000,000 prompt tokens of which 600,000 cached, 200,000 completion tokens of which 150,000 reasoning.
    p = provider(lambda body, headers: Reply(usage=usage(1_000_000, 200_000, cached=600_000, reasoning=150_000)))
    price = {"input_per_mtok": 2.50, "cached_input_per_mtok": 0.25, "output_per_mtok": 10.00}
    c, _ = job(p.url, tmp_path, ["a", "b"], {"price": price})
    e = c.info["endpoint"]
    # By hand: 400,000 x $2.50/M + 600,000 x $0.25/M + 200,000 x $10/M = $1.00 + $0.15 + $2.00 = $3.15 each.
    assert round(e["cost_usd"], 2) == 6.30 and [round(r["cost_usd"], 2) for r in c.results] == [3.15, 3.15]
    assert e["cached_tokens"] == 1_200_000 and e["reasoning_tokens"] == 300_000
    # In a batch file every price is halved (batch_discount 0.5 of the list prices): $1.575.
    assert round(Price(2.50, 10.00, 0.5, 0.25).cost(1_000_000, 200_000, True, 600_000), 3) == 1.575
    assert Endpoint.of(spec_for("judge", model="m", engine="openai", price=price)).price.cached_input_per_mtok == 0.25


# --- batches across shard layouts ------------------------------------------------------------------

BATCH_JOB = """
import os, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_endpoint_edges import job
os.environ["EDGE_KEY"] = "k"
job(sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(","), writer="a", batch=True, batch_poll_seconds=0.1)
"""


def test_every_paid_line_of_a_batch_is_stored_whichever_job_reads_it(provider, tmp_path):
    """Job a (four items) submits its batch and is killed before the batch ends; job b, of another shard
    layout, holds two of those items and two others: it polls a's batch, stores all four paid lines (a's
    under a's name, so that a's later attempts count their cost) and uploads only its two new ones; a job
    holding a's other two items then finds them stored and uploads nothing."""
    from batch_standin import BatchStandIn

    chat = provider()
    batches = BatchStandIn(chat.url, shuffle=False, hold=True)
    texts = [f"item {i}" for i in range(6)]
    script = tmp_path / "a.py"
    script.write_text(BATCH_JOB.format(tests=str(ROOT / "tests")))
    a = subprocess.Popen([sys.executable, str(script), batches.url, str(tmp_path), ",".join(texts[:4])], cwd=ROOT)
    try:
        state = tmp_path / "store" / "batches"
        submitted = lambda: any('"id"' in p.read_text() for p in state.glob("*.json"))  # noqa: E731
        wait_until(lambda: state.exists() and submitted(), "job a submitted its batch", a, 300)
        a.kill()
        a.wait(30)
        batches.release()
        b, store = job(batches.url, tmp_path, texts[2:], writer="b", batch=True, batch_poll_seconds=0.1)
        assert [r["output"] for r in b.results] == ["ok"] * 4 and batches.uploads == 2
        stored = store.load()
        assert {r["job"] for r in stored.values()} == {"a", "b"} and len(stored) == 6
        c, _ = job(batches.url, tmp_path, texts[:2], writer="c", batch=True, batch_poll_seconds=0.1)
        assert [r["output"] for r in c.results] == ["ok", "ok"] and batches.uploads == 2
        assert all(chat.requests[t] == 1 for t in texts)  # each line paid once
        assert sorted(r["id"] for r in stored.values() if r["job"] == "a") == ["q0", "q1"]  # a's own ids
    finally:
        if a.poll() is None:
            a.kill()
        batches.stop()


def test_a_withheld_answer_kept_under_count_wrong_is_graded_wrong_without_the_judge():
    import pandas as pd

    from genjudge.judging import modes
    from genjudge.judging.modes.base import WITHHELD
    from genjudge.judging.modes.pairwise import WITHHELD_ANSWER

    gens = pd.DataFrame(
        {
            "id": ["a", "b"],
            "prompt": ["2+2?", "3+3?"],
            "reference": ["4", "6"],
            "output": ["4", ""],
            "finish_reason": ["eos", "content_filter"],
            "turn": [1, 1],
            "sample": [0, 0],
        }
    )

    def graded(mode, options=None, opponent=None, template="{question} {reference} {candidate}"):
        spec = spec_for("judge", model="m", mode=mode)
        reqs = modes.get(mode).requests(gens, spec, template, opponent)
        raw = pd.DataFrame(
            {
                "id": [r.id for r in reqs],
                "order": [r.order for r in reqs],
                "decided_by": [r.decided_by for r in reqs],
                "judge_output": [
                    "VERDICT: CORRECT\nSCORE: 9\n[[A]]" if r.decided_by == "judge" else None for r in reqs
                ],
                "p_correct": [None] * len(reqs),
                "turn": [r.turn for r in reqs],
                "sample": [r.sample for r in reqs],
            }
        )
        out = modes.get(mode).parse(gens.copy(), raw, None, options)
        return out.set_index("id")[["decided_by", "verdict"]].values.tolist()

    assert graded("reference") == [["judge", "correct"], [WITHHELD, "incorrect"]]
    assert graded("score", {"score_range": [1, 10]})[1] == [WITHHELD, "1"]
    theirs = {("a", 1, 0): WITHHELD_ANSWER, ("b", 1, 0): "6"}
    template = "{question} {answer_a} {answer_b}"
    pair = graded("pairwise", opponent=theirs, template=template)
    assert pair == [[f"{WITHHELD}: opponent", "win"], [f"{WITHHELD}: candidate", "loss"]]


# --- planning from what the endpoint jobs measured ---------------------------------------------------


def test_plan_calibrate_takes_an_endpoint_jobs_measured_speed_and_tokens(tmp_path):
    """A run whose only computing jobs were endpoint jobs: --calibrate reads their requests a second and the
    tokens a request was billed, instead of refusing ("no job metas with timings") or keeping the assumption."""
    from genjudge.cluster.gpu_lease import Lease
    from genjudge.stages.plan import make_plan
    from genjudge.store.records import JudgeMeta

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "answer": "x"}) + "\n" for i in range(40)))
    judge = {
        "model": "gpt-4.1-2025-04-14",
        "engine": "openai",
        "endpoint": {"base_url": "https://api.example.com/v1", "max_connections": 8, "latency_seconds": 5},
        "price": {"input_per_mtok": 2.0, "output_per_mtok": 8.0},
    }
    cfg = wfconfig.validate(
        {
            "run": "pilot",
            "shards": 1,
            "dataset": {"path": str(data)},
            "generator": {"model": str(ROOT / "models/demo-generator")},
            "judge": judge,
        },
        ROOT,
    )
    shards = tmp_path / "results" / "pilot" / "judge" / "demo-judge" / "shards"
    shards.mkdir(parents=True)
    meta = JudgeMeta.start(Lease([], "none"), run="pilot", model=judge["model"], n_items=40, computed_items=40)
    meta.endpoint = {
        "model": judge["model"],
        "base_url": "https://api.example.com/v1",
        "max_connections": 8,
        "requests": 41,
        "completed": 40,
        "seconds": 10.0,
        "prompt_tokens": 41 * 1665,
        "completion_tokens": 41 * 120,
    }
    meta.finish(shards / "0.meta.json")
    lines, plans = make_plan(
        cfg, None, roles=("judge",), calibrate=str(tmp_path / "results" / "pilot"), workflow_dir=ROOT
    )
    text = "\n".join(lines)
    assert "replaced, judge gpt-4.1-2025-04-14: 4.00 requests/s at 8 connections (a request 2.00 s)" in text, text
    t = plans[0]["time"]["all"]
    assert t["prompt_tokens_per_job"] == 40 * 1665 and t["seconds_per_job"] == pytest.approx(10.0)
    assert "assumed" not in next(line for line in lines if "time: about" in line)
