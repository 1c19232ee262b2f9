"""engine: openai without a server: the retry policy, adaptive concurrency, logprob labels read from
top_logprobs, the budget, URLs and keys, the config's refusals, the plan, and the MT-bench example that
grades as FastChat's GPT-4 judge does (its exact messages, a dry run and a plan without the key)."""

import asyncio
import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from conftest import wait_until
from judges import ROOT

from genjudge import config as wfconfig
from genjudge.config.specs import JudgeSpec, spec_for
from genjudge.data.conversation import placeholders
from genjudge.engine.endpoint import policy
from genjudge.engine.endpoint.cost import Budget, BudgetReached, BudgetWait
from genjudge.engine.endpoint.probe import probe_body
from genjudge.engine.endpoint.requests import (
    Incomplete as IncompleteResponse,
)
from genjudge.engine.endpoint.requests import (
    LogprobVerdict,
    after_marker,
    body,
    label_logprobs,
    read_verdict,
    result,
    split,
)
from genjudge.engine.endpoint.run import EndpointPromptSet, complete_endpoint, computed_of
from genjudge.engine.endpoint.settings import Endpoint, Price, redact
from genjudge.errors import InputError
from genjudge.judging import modes
from genjudge.judging.modes.base import LOGPROB_UNSEEN as PARSE_UNSEEN
from genjudge.judging.template_rules import Templates
from genjudge.judging.templates import render_request
from genjudge.models.endpoints import check_url, max_output_tokens, moving_alias, public_url
from genjudge.store.item_store import ItemStore

VERDICT = LogprobVerdict(("CORRECT", "INCORRECT"), "VERDICT:")


# --- the retry policy ------------------------------------------------------------------------------


def test_reset_durations_and_server_waits():
    assert policy.duration("1s") == 1.0 and policy.duration("6m0s") == 360.0 and policy.duration("20ms") == 0.02
    assert policy.duration("1h2m3.5s") == 3723.5 and policy.duration("2.5") == 2.5 and policy.duration("soon") is None
    assert policy.server_wait({"retry-after": "7"}) == 7.0
    assert policy.server_wait({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 < policy.server_wait({"retry-after": date}) <= 31
    assert policy.server_wait({"x-ratelimit-reset-requests": "2s", "x-ratelimit-reset-tokens": "6m0s"}) == 360.0
    # Where the server says what is left, the spent limit's reset, not the longer one.
    resets = {"x-ratelimit-reset-requests": "2s", "x-ratelimit-reset-tokens": "6m0s"}
    left = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "25000"}
    assert policy.server_wait({**resets, **left}) == 2.0
    left = {"x-ratelimit-remaining-requests": "12", "x-ratelimit-remaining-tokens": "0"}
    assert policy.server_wait({**resets, **left}) == 360.0
    left = {"x-ratelimit-remaining-requests": "12", "x-ratelimit-remaining-tokens": "25000"}
    assert policy.server_wait({**resets, **left}) == 2.0  # neither spent: the sooner
    assert policy.server_wait({"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "9"}) == 360.0
    assert policy.server_wait({}) is None


def test_what_is_retried_and_what_is_not():
    limited = policy.classify(429, "rate limit", {"retry-after": "3"})
    assert isinstance(limited, policy.Retry) and limited.cause == "429" and limited.after == 3.0
    for status in (408, 409, 500, 502, 503, 504):
        assert isinstance(policy.classify(status, "x", None), policy.Retry)
    # vLLM's and OpenAI's words for a prompt longer than the context: the item is too long, not retried.
    vllm = "This model's maximum context length is 512 tokens. However, you requested 600 tokens (88 in the messages, 512 in the completion)."
    assert isinstance(policy.classify(400, vllm, None), policy.TooLong)
    assert isinstance(policy.classify(400, "context_length_exceeded: prompt is too long", None), policy.TooLong)
    for status in (400, 401, 403, 404, 422):
        refused = policy.classify(status, "bad request: unknown field", None)
        assert isinstance(refused, policy.Refused) and refused.status == status


AZURE_FILTER = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
    "Please modify your prompt and retry."
)
OPENAI_FLAGGED = (
    "Invalid prompt: your prompt was flagged as potentially violating our usage policy. "
    "Please try again with a different prompt"
)
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more information on "
    "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)


def test_a_content_filter_refuses_one_item_and_a_spent_quota_stops_the_job():
    # A content filter's refusal is the item's own: given up alone, never retried, never the job's end.
    for message, code in ((AZURE_FILTER, "content_filter"), (OPENAI_FLAGGED, "invalid_prompt")):
        assert isinstance(policy.classify(400, message, None, code), policy.Filtered)
        assert isinstance(policy.classify(400, message, None), policy.Filtered)  # a proxy that dropped the code
        assert isinstance(policy.classify(400, "refused", None, code), policy.Filtered)
    # A spent quota: no wait brings it back, whatever Retry-After says.
    spent = policy.classify(429, QUOTA, {"retry-after": "20"}, "insufficient_quota")
    assert isinstance(spent, policy.Refused) and spent.status == 429 and "exceeded your current quota" in str(spent)
    assert isinstance(policy.classify(429, QUOTA, None), policy.Refused)
    assert isinstance(
        policy.classify(429, "Rate limit reached for requests", None, "rate_limit_exceeded"), policy.Retry
    )
    # The other 4xx still stop the job.
    for status, code in ((400, "invalid_request_error"), (401, "invalid_api_key"), (404, "model_not_found")):
        refused = policy.classify(status, "bad request: unknown field", None, code)
        assert isinstance(refused, policy.Refused) and refused.status == status


def test_backoff_is_jittered_bounded_and_a_server_wait_wins():
    rng = random.Random(0)
    waits = [policy.backoff(a, rng) for a in range(12) for _ in range(50)]
    assert min(waits) >= 0 and max(waits) <= policy.BACKOFF_CAP
    assert max(policy.backoff(0, rng) for _ in range(200)) <= policy.BACKOFF_BASE
    waits = [policy.wait_for(policy.Retry("429", after=5.0), 9, rng) for _ in range(200)]
    assert min(waits) >= 5.0 and max(waits) <= 10.0 and max(waits) - min(waits) > 3  # never sooner, spread out
    # A server's very short wait (retry-after-ms: 1) is floored at the base backoff, and such a rate limit
    # counts against max_attempts: it does not make a try every few milliseconds.
    short = policy.Retry("429", after=0.001)
    assert all(policy.BACKOFF_BASE <= policy.wait_for(short, 0, rng) <= 2 * policy.BACKOFF_BASE for _ in range(50))
    assert not policy.says_not_now(short) and policy.says_not_now(policy.Retry("429", after=5.0))
    assert policy.says_not_now(policy.Retry("429")) and not policy.says_not_now(policy.Retry("500", after=5.0))


def test_concurrency_is_cut_once_per_round_where_rate_limits_are_a_fifth_of_it_and_climbs_back():
    async def scenario():
        c = policy.Concurrency(10)
        sent = [await c.acquire() for _ in range(10)]
        assert c.active == 10
        for s in sent:  # ten 429s of requests sent before the cut: one cut
            c.rate_limited(s)
        assert c.limit == pytest.approx(9.0) and c.cuts == 1
        for _ in range(10):
            await c.release()
        # One refusal in ten, round after round (a provider refusing a share whatever the load): no cut.
        for _ in range(5):
            for _ in range(9):
                await c.succeeded()
            c.rate_limited(await c.acquire())
            await c.release()
        assert c.cuts == 1 and c.limit > 9.0
        # Three in ten (more requests in flight than a limit allows): cut again.
        for k in range(10):
            if k % 3 == 0:
                c.rate_limited(await c.acquire())
                await c.release()
            else:
                await c.succeeded()
        assert c.cuts == 2 and c.limit < 10.0
        for _ in range(200):
            await c.succeeded()
        assert c.limit == 10.0  # back to max_connections, never above
        floor = policy.Concurrency(1)
        for _ in range(10):
            floor.rate_limited(await floor.acquire())
            await floor.release()
        assert floor.limit == 1.0  # never below one request in flight

    asyncio.run(scenario())


# --- responses and logprob verdicts -----------------------------------------------------------------


def response(content="VERDICT: CORRECT", top=None, usage=True, finish="stop"):
    choice = {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
    if top is not None:
        first = top[0]["token"] if top else ""
        choice["logprobs"] = {"content": [{"token": first, "logprob": -0.1, "top_logprobs": top}]}
    r = {"choices": [choice], "model": "m", "system_fingerprint": "fp"}
    if usage:
        r["usage"] = {"prompt_tokens": 12, "completion_tokens": 3}
    return r


def test_a_label_is_its_longest_listed_first_token_and_never_guessed():
    listed = [(" INCORRECT", -0.01), (" COR", -4.8), (" CORR", -5.5), (":", -7.0)]
    assert label_logprobs(listed, ("CORRECT", "INCORRECT")) == ({"INCORRECT": -0.01, "CORRECT": -5.5}, "")
    assert label_logprobs([("A", -0.1), (" B", -2.0), (" TIE", -3.0)], ("A", "B", "TIE"))[0] == {
        "A": -0.1,
        "B": -2.0,
        "TIE": -3.0,
    }
    # A token both labels start with tells them apart no more than the in-process engines would.
    found, why = label_logprobs([(" AB", -0.1), (" B", -2.0)], ("ABC", "ABD"))
    assert found is None and "share their first token" in why
    found, why = label_logprobs([(" The", -0.2), (" I", -1.0)], ("CORRECT", "INCORRECT"))
    assert found is None and "no verdict label among the 2 top_logprobs" in why and '" The"' in why


def test_a_verdict_read_from_top_logprobs():
    top = [{"token": " INCORRECT", "logprob": -0.05}, {"token": " CORRECT", "logprob": -3.0}]
    out = read_verdict(response(top=top)["choices"][0], VERDICT, prefill=True)
    assert out["output"] == "VERDICT: INCORRECT" and out["finish_reason"] == "logprob"
    assert out["p_correct"] == pytest.approx(1 / (1 + 2.718281828459045 ** (3.0 - 0.05)), rel=1e-9)
    # A label not listed is at most the smallest listed logprob: the verdict is certain, the probability a bound.
    out = read_verdict(
        response(top=[{"token": " CORRECT", "logprob": -0.01}, {"token": "x", "logprob": -9}])["choices"][0],
        VERDICT,
        True,
    )
    assert out["output"] == "VERDICT: CORRECT" and out["logprob_bounded"] == ["INCORRECT"]
    unseen = read_verdict(response(top=[{"token": " maybe", "logprob": -0.1}])["choices"][0], VERDICT, True)
    assert unseen["finish_reason"] == PARSE_UNSEEN and unseen["p_correct"] is None and "maybe" in unseen["output"]
    # Without prefill: the reply is read at the token after its last marker.
    assert after_marker(["I think", " VER", "DICT", ":", " CORRECT", ".\n", "VERDICT:", " INC"], "VERDICT:") == 7
    assert after_marker(["no marker here"], "VERDICT:") is None


def test_a_response_without_what_was_asked_is_incomplete_and_retried():
    with pytest.raises(IncompleteResponse, match="no logprobs"):
        read_verdict(response()["choices"][0], VERDICT, True)
    # A 200 without usage (some servers and gateways omit it) is an answer: kept, marked, and counted by
    # the sender at its worst case as possibly billed; so is one whose counts are null.
    kept = result(response(usage=False), None, False)
    assert kept["output"] == "VERDICT: CORRECT" and kept["usage_missing"] and kept["completion_tokens"] == 0
    nulls = {**response(), "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}}
    assert result(nulls, None, False)["usage_missing"]
    with pytest.raises(IncompleteResponse, match="no choices"):
        result({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}, None, False)
    ok = result(response(finish="length"), None, False)
    assert ok["finish_reason"] == "length" and ok["n_prompt_tokens"] == 12 and ok["served_model"] == "m"
    assert result(response(), None, False)["finish_reason"] == "eos"


def test_the_parse_stage_names_an_unseen_label_as_its_cause():
    assert PARSE_UNSEEN == "logprob-unseen"  # engine.endpoint.requests holds the same string
    from genjudge.engine.endpoint.requests import LOGPROB_UNSEEN

    assert LOGPROB_UNSEEN == PARSE_UNSEEN


# --- the budget --------------------------------------------------------------------------------------


def test_the_budget_reserves_the_worst_case_and_stops_before_it_would_pass():
    price = Price(100.0, 100.0, 0.5)
    b = Budget(price, limit=0.01)
    req = {"messages": [{"role": "user", "content": "x" * 20}], "max_tokens": 10}
    worst = b.worst_case(req)  # a token per byte of the messages until responses show the ratio
    assert worst >= (20 + 10) * 100 / 1e6
    b.reserve("a", req)
    assert b.reserved == pytest.approx(worst)
    b.paid("a", req, prompt_tokens=8, completion_tokens=4)
    assert b.reserved == 0 and b.spent == pytest.approx(12 * 100 / 1e6)
    assert b.worst_case(req) < worst  # the learnt ratio (with a margin) replaces a token per byte
    # While others are in flight, a request that does not fit waits for them (BudgetWait); the worst cases
    # in flight pass what is left by at most one request's.
    sent = 0
    with pytest.raises(BudgetWait):
        for i in range(1000):
            b.reserve(i, req)
            sent += 1
    assert not b.stopped and b.spent + b.reserved <= 0.01 + b.worst_case(req)
    for i in range(sent):  # each answer billed at its worst: never past the budget by more than one of them
        b.paid(i, req, prompt_tokens=b._prompt_bound(req), completion_tokens=10)
    assert b.spent <= 0.01 + b.worst_case(req)
    with pytest.raises(BudgetReached, match="max_cost_usd 0.01") as stop:  # none in flight: the job stops
        while True:
            b.reserve("next", req)
            b.paid("next", req, prompt_tokens=b._prompt_bound(req), completion_tokens=10)
    assert not isinstance(stop.value, BudgetWait) and b.stopped
    # Results an earlier attempt paid count too; batch files cost the discounted price.
    later = Budget(price, limit=0.01, batch=True)
    later.stored(0.009)
    assert not later.affords(req) and later.stopped
    assert Price(1.0, 2.0, 0.5).cost(1_000_000, 1_000_000, batch=True) == 1.5
    assert Budget(Price(None, None, 0.5), limit=None).affords(req)


REASONING = {"max_tokens": None, "max_completion_tokens": 4096, "temperature": None}  # config/README.md's
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}


def reasoning_judge(**values):
    ep = {"base_url": "https://api.example.com/v1", "extra_body": REASONING}
    return spec_for("judge", model="o3-2025-04-16", engine="openai", max_new_tokens=16, endpoint=ep, **values)


def test_the_budget_reserves_max_completion_tokens_where_extra_body_leaves_max_tokens_out(tmp_path):
    o3 = reasoning_judge(price=PRICE, max_cost_usd=1.0)
    endpoint = Endpoint.of(o3)
    req = body(o3, endpoint, [{"role": "user", "content": "q"}])
    assert "max_tokens" not in req and max_output_tokens(req) == 4096
    b = Budget(endpoint.price, endpoint.max_cost_usd)
    worst = b.worst_case(req)
    assert worst >= 4096 * 8.0 / 1e6
    # $1 holds about 30 such worst cases ($0.033 each), not the thousands that prompts alone would allow.
    sent = 0
    with pytest.raises(BudgetReached):
        for i in range(1000):
            b.reserve(i, req)
            sent += 1
    assert sent == int(1.0 / worst) == 30 and b.reserved <= 1.0
    # Both set: the larger (servers differ in which one wins); neither: no bound, which a budget refuses.
    assert max_output_tokens({"max_tokens": 10, "max_completion_tokens": 300}) == 300
    assert max_output_tokens({"max_tokens": None}) is None
    with pytest.raises(InputError, match="max_cost_usd: a request without max_tokens or max_completion_tokens"):
        b.worst_case({"messages": req["messages"]})
    # ... and so does the config, before any job, naming the key.
    endpoint = {"base_url": "https://api.example.com/v1", "extra_body": {"max_tokens": None}}
    with pytest.raises(InputError, match=r"judge.endpoint.extra_body: max_tokens: null without max_completion_tokens"):
        checked(tmp_path, endpoint=endpoint, price=PRICE, max_cost_usd=5)
    checked(tmp_path, endpoint={**endpoint, "extra_body": REASONING}, price=PRICE, max_cost_usd=5)
    checked(tmp_path, endpoint=endpoint)  # no budget: nothing to reserve


def test_the_capability_probe_of_a_reasoning_model_is_short_too():
    o3 = reasoning_judge()
    probe = probe_body(o3, Endpoint.of(o3), None)
    assert "max_tokens" not in probe and probe["max_completion_tokens"] == 16


def test_the_plan_counts_answers_at_the_bound_the_requests_carry(tmp_path):
    from genjudge.stages.plan import make_plan

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "answer": "x"}) + "\n" for i in range(3)))

    def planned(extra_body):
        endpoint = {"base_url": "https://api.example.com/v1", "extra_body": extra_body}
        generator = dict(model="o3-2025-04-16", engine="openai", max_new_tokens=512, endpoint=endpoint, price=PRICE)
        cfg = {"run": "r", "shards": 1, "dataset": {"path": str(data)}, "generator": generator}
        cfg["judge"] = {"model": str(ROOT / "models/demo-judge")}
        lines, plans = make_plan(wfconfig.validate(cfg, ROOT), None, roles=("generator",), workflow_dir=ROOT)
        return "\n".join(lines), plans[0]["time"]["d"]

    text, time_plan = planned(REASONING)
    assert time_plan["completion_tokens_per_job_at_most"] == 3 * 4096
    assert time_plan["cost_usd_per_job"] == pytest.approx(3 * 4096 * 8.0 / 1e6, rel=0.01)
    assert "at most 12,288 completion tokens (endpoint.extra_body.max_completion_tokens each, an upper bound)" in text
    text, time_plan = planned({})
    assert time_plan["completion_tokens_per_job_at_most"] == 3 * 512 and "(max_new_tokens each, an upper bound)" in text
    text, time_plan = planned({"max_tokens": None})
    assert time_plan["completion_tokens_per_job_at_most"] == 3 * 512 and "though nothing bounds them" in text
    # The time rests on an assumed latency: the runtime's margin is widened for it, and says so.
    runtime = next(line for line in text.splitlines() if "resources.endpoint.runtime" in line)
    assert "x1.5 x 1.5 per assumed kind of figure = x2.25; it rests on 1 assumed: latency: " in runtime
    assert "every figure it rests on was measured" not in text


# --- URLs, keys, names ------------------------------------------------------------------------------


def test_urls_keys_and_names():
    assert public_url("https://user:pw@api.example.com:8443/v1/?key=1") == "https://api.example.com:8443/v1"
    check_url("http://127.0.0.1:8000/v1", "judge.endpoint", False)
    check_url("http://localhost:8000/v1", "judge.endpoint", False)
    check_url("http://10.0.0.5:8000/v1", "judge.endpoint", True)
    with pytest.raises(InputError, match=r"judge.endpoint.base_url: .*plain http.*allow_http"):
        check_url("http://gpu-node-7:8000/v1", "judge.endpoint", False)
    with pytest.raises(InputError, match="holds credentials.*api_key_env"):
        check_url("https://me:secret@api.example.com/v1", "judge.endpoint", False)
    with pytest.raises(InputError, match="not set"):
        check_url(None, "judges.gpt.endpoint", False)
    assert redact("Incorrect API key provided: sk-abc123. Authorization: Bearer sk-abc123", ["sk-abc123"]) == (
        "Incorrect API key provided: [redacted]. Authorization: Bearer [redacted]"
    )
    assert [moving_alias(m) for m in ("gpt-4o", "gpt-4o-2024-08-06", "gpt-4-0613", "claude-3-5-sonnet-latest")] == [
        True,
        False,
        False,
        True,
    ]
    assert not moving_alias("meta-llama/Llama-3.1-70B-Instruct")  # a served checkpoint's id names its files


def test_the_item_key_holds_the_endpoint_and_request_settings_never_the_key(monkeypatch):
    base = {"model": "gpt-4.1-2025-04-14", "engine": "openai", "endpoint": {"base_url": "https://api.example.com/v1"}}
    spec = spec_for("judge", **base)
    params = spec.item_params()
    assert params["endpoint"] == {"base_url": "https://api.example.com/v1", "extra_body": {}}
    # What a local model reads and an endpoint never does changes nothing.
    assert spec_for("judge", **base, dtype="float16", batch_size=4).item_params() == params
    assert spec_for("judge", **{**base, "endpoint": {**base["endpoint"], "max_connections": 3}}).item_params() == params
    assert (
        spec_for("judge", **{**base, "endpoint": {"base_url": "https://other.example.com/v1"}}).item_params() != params
    )
    extra = {**base["endpoint"], "extra_body": {"top_k": 20}}
    assert spec_for("judge", **{**base, "endpoint": extra}).item_params() != params
    assert spec_for("judge", **base, max_new_tokens=7).item_params() != params
    assert spec.fingerprint() != spec_for("judge", **{**base, "model": "gpt-4.1-mini-2025-04-14"}).fingerprint()
    monkeypatch.setenv("GENJUDGE_K", "sk-secret-abc")
    keyed = spec_for("judge", **{**base, "endpoint": {**base["endpoint"], "api_key_env": "GENJUDGE_K"}})
    assert "sk-secret-abc" not in json.dumps([keyed.item_params(), keyed.rerun_params(), keyed.fingerprint()])
    assert Endpoint.of(keyed).api_key() == "sk-secret-abc"
    monkeypatch.delenv("GENJUDGE_K")
    with pytest.raises(InputError, match="GENJUDGE_K is not set"):
        Endpoint.of(keyed).api_key()


def test_request_bodies():
    ep = {"base_url": "http://127.0.0.1:1/v1", "extra_body": {"top_k": 5}, "prefill": True}
    judge = spec_for("judge", model="m", engine="openai", max_new_tokens=9, endpoint=ep)
    msgs = [{"role": "user", "content": "q"}]
    b = body(judge, Endpoint.of(judge), msgs)
    assert b["temperature"] == 0.0 and b["max_tokens"] == 9 and b["top_k"] == 5 and "seed" not in b
    lp = body(judge, Endpoint.of(judge), msgs, verdict=VERDICT)
    assert lp["max_tokens"] == 1 and lp["logprobs"] and lp["top_logprobs"] == 20 and lp["continue_final_message"]
    # A reasoning model: max_completion_tokens instead of max_tokens, and no temperature.
    reasoning = {**ep, "extra_body": {"max_tokens": None, "max_completion_tokens": 4096, "temperature": None}}
    o = spec_for("judge", model="o3-2025-04-16", engine="openai", endpoint=reasoning)
    known, extra = split(body(o, Endpoint.of(o), msgs))
    assert known == {"model": "o3-2025-04-16", "messages": msgs, "n": 1, "max_completion_tokens": 4096} and extra == {}
    gen = spec_for("generator", model="m", engine="openai", do_sample=True, temperature=0.7, top_p=0.9, endpoint=ep)
    s = body(gen, Endpoint.of(gen), msgs, seed=42)
    assert (s["temperature"], s["top_p"], s["seed"]) == (0.7, 0.9, 42)


# --- the config's refusals ---------------------------------------------------------------------------


def checked(tmp_path, **judge):
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "question": "q?", "answer": "x"}\n')
    cfg = wfconfig.validate(
        {
            "run": "r",
            "shards": 1,
            "dataset": {"path": str(data)},
            "generator": {"model": str(ROOT / "models/demo-generator")},
            "judge": {"model": "gpt-4.1-2025-04-14", "engine": "openai", **judge},
        }
    )
    wfconfig.check(cfg, data=True, loadable=False)
    return cfg


def test_the_config_names_the_key_of_what_an_endpoint_cannot_do(tmp_path):
    ok = {"endpoint": {"base_url": "https://api.example.com/v1"}}
    checked(tmp_path, **ok)  # no config.json, no weights, no key needed to plan
    with pytest.raises(InputError, match=r"judge.endpoint.base_url: not set"):
        checked(tmp_path)
    with pytest.raises(InputError, match=r"judge.use_chat_template: false needs a local model"):
        checked(tmp_path, **ok, use_chat_template=False)
    with pytest.raises(InputError, match=r"judge.max_cost_usd: a budget needs the model's price"):
        checked(tmp_path, **ok, max_cost_usd=5)
    with pytest.raises(InputError, match=r"judge.parallel: tensor"):
        checked(tmp_path, **ok, parallel="tensor")
    with pytest.raises(InputError, match=r"plain http"):
        checked(tmp_path, endpoint={"base_url": "http://example.com/v1"})
    with pytest.raises(Exception, match="api_key_env"):  # a name, never a key: the schema's pattern
        checked(tmp_path, endpoint={"base_url": "https://api.example.com/v1", "api_key_env": "sk-abc 123"})


# --- a job's requests against a loopback stand-in (no model) -----------------------------------------


class ChatStandIn:
    """A loopback chat completions API without a model: a prompt in `errors` gets that (status, body,
    headers) (a 200 with no body: the reply "ok"), every other prompt the reply "ok". Counts the
    requests per prompt. Two statuses that are no status: ("slow", seconds, {}) answers "ok" that much
    later, ("cut", None, {}) a 200 whose JSON body stops half-way."""

    def __init__(self, errors: dict):
        self.errors = errors
        self.requests: dict = {}
        self.stopped = threading.Event()  # a slow answer still pending when the test ends is dropped
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["content-length"])))
                prompt = req["messages"][-1]["content"]
                standin.requests[prompt] = standin.requests.get(prompt, 0) + 1
                status, payload, headers = standin.errors.get(prompt, (200, None, {}))
                cut = status == "cut"
                if status == "slow" and standin.stopped.wait(payload):
                    return
                if status in ("slow", "cut"):
                    status, payload = 200, None
                if status == 200 and payload is None:
                    payload = {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": req["model"],
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                    }
                data = json.dumps(payload).encode()
                data = data[: len(data) // 2] if cut else data
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def error_body(message: str, code: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.fixture
def chat_standin():
    made = []

    def make(errors):
        made.append(ChatStandIn(errors))
        return made[-1]

    yield make
    for standin in made:
        standin.stop()


def endpoint_job(url, tmp_path, texts, values=None, **endpoint):
    spec = spec_for(
        "generator",
        model="gpt-4.1-2025-04-14",
        engine="openai",
        max_new_tokens=8,
        endpoint={"base_url": url, "check_capabilities": False, "max_wait": 3, **endpoint},
        **(values or {}),
    )
    store = ItemStore(tmp_path / "store", "w")
    ids = [f"q{i}" for i in range(len(texts))]
    return complete_endpoint(EndpointPromptSet(spec, "generate"), texts, ids, store, "shard 0", None), store


@pytest.mark.parametrize(
    "refusal",
    [(AZURE_FILTER, "content_filter"), (OPENAI_FLAGGED, "invalid_prompt")],
    ids=["azure", "openai"],
)
def test_a_prompt_the_content_filter_refuses_is_given_up_alone_and_reported(refusal, chat_standin, tmp_path):
    standin = chat_standin({"flagged": (400, error_body(*refusal), {})})
    c, store = endpoint_job(standin.url, tmp_path, ["fine", "flagged", "also fine"])
    # The others are answered and stored; the refused one has no result and says why (its cell or shard
    # fails, listed, and a rerun sends only it), and it was sent once: another try gets the same answer.
    assert [r and r["output"] for r in c.results] == ["ok", None, "ok"]
    assert list(c.incomplete) == [1] and "refused by the provider's content filter" in c.incomplete[1]
    assert refusal[0][:40] in c.incomplete[1]
    assert c.info["endpoint"]["given_up"] == {"content_filter": 1} and c.info["endpoint"]["completed"] == 2
    assert standin.requests == {"fine": 1, "flagged": 1, "also fine": 1}
    assert len(store.load()) == 2
    # A rerun sends only the refused item, and reports it again.
    c, _ = endpoint_job(standin.url, tmp_path, ["fine", "flagged", "also fine"])
    assert list(c.incomplete) == [1] and standin.requests["flagged"] == 2 and standin.requests["fine"] == 1


def test_a_batch_line_the_content_filter_refused_is_given_up_alone(chat_standin, tmp_path):
    from batch_standin import BatchStandIn

    chat = chat_standin({"flagged": (400, error_body(AZURE_FILTER, "content_filter"), {})})
    batches = BatchStandIn(chat.url, shuffle=False)
    try:
        c, _ = endpoint_job(batches.url, tmp_path, ["fine", "flagged"], batch=True, batch_poll_seconds=0.05)
    finally:
        batches.stop()
    assert [r and r["output"] for r in c.results] == ["ok", None]
    assert list(c.incomplete) == [1] and "refused by the provider's content filter" in c.incomplete[1]
    assert c.info["endpoint"]["given_up"] == {"content_filter": 1}
    assert batches.uploads == 1 and chat.requests["flagged"] == 1  # not put into another file


def test_a_spent_quota_stops_the_job_at_once_with_the_providers_message(chat_standin, tmp_path):
    # Retry-After and max_wait would let a rate limit be retried: a spent quota is not waited for.
    quota = (429, error_body(QUOTA, "insufficient_quota", "insufficient_quota"), {"retry-after": "30"})
    standin = chat_standin({"q": quota})
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"refused a request \(HTTP 429: .*exceeded your current quota"):
        endpoint_job(standin.url, tmp_path, ["q"], max_connections=1, max_wait=60)
    # A wait would have taken 30 s: far from what a loaded machine adds to one request.
    assert standin.requests == {"q": 1} and time.monotonic() - t0 < 20
    # Any other 4xx still stops the job.
    standin = chat_standin({"q": (401, error_body("Incorrect API key provided", "invalid_api_key"), {})})
    with pytest.raises(InputError, match=r"refused a request \(HTTP 401: .*Incorrect API key"):
        endpoint_job(standin.url, tmp_path, ["q", "r"], max_connections=1)


# A 200 that bills its tokens and holds no answer (a provider's empty reply): kept it cannot be, paid it was.
EMPTY_200 = (
    200,
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8},
    },
    {},
)
PRICED = {"price": {"input_per_mtok": 3500.0, "output_per_mtok": 3500.0}, "max_cost_usd": 1.0}
TRY = 28 * 3500 / 1e6  # what one empty reply costs: $0.098
FINE = 6 * 3500 / 1e6  # the reply "ok"


def test_a_paid_answer_that_cannot_be_kept_counts_against_the_budget_now_and_in_the_rerun(chat_standin, tmp_path):
    standin = chat_standin({"empty": EMPTY_200})
    c, _ = endpoint_job(standin.url, tmp_path, ["fine", "empty"], PRICED, max_attempts=2)
    e = c.info["endpoint"]
    # Both tries of the empty one were billed and thrown away: spent all the same, and retried within
    # max_attempts only.
    assert standin.requests == {"fine": 1, "empty": 2}
    assert list(c.incomplete) == [1] and "no choices in the response" in c.incomplete[1]
    assert e["unkept"] == 2 and e["given_up"] == {"incomplete": 1}
    assert e["cost_usd"] == pytest.approx(2 * TRY + FINE)
    ledger = tmp_path / "store" / "unkept" / "w.jsonl"
    assert [json.loads(line)["cost_usd"] for line in ledger.read_text().splitlines()] == [pytest.approx(TRY)] * 2
    # Each rerun counts them as spent by earlier attempts (its budget holds what is left, not $1 again),
    # until the next try's worst case no longer fits: never past the budget.
    total = e["cost_usd"]
    for _ in range(8):
        c, _ = endpoint_job(standin.url, tmp_path, ["fine", "empty"], PRICED, max_attempts=2)
        e = c.info["endpoint"]
        assert e["cost_usd_earlier_attempts"] == pytest.approx(total)
        total += e["cost_usd"]
        assert total <= 1.0 and e["cost_usd"] == pytest.approx(e["unkept"] * TRY)
        if e["budget_stopped"]:
            break
    assert e["budget_stopped"] and c.incomplete[1] == "not sent: max_cost_usd reached"
    assert standin.requests["empty"] == len(ledger.read_text().splitlines()) == round((total - FINE) / TRY) >= 8
    assert standin.requests["fine"] == 1


def test_tries_with_no_answer_count_at_their_worst_case_so_that_the_budget_bounds_the_bill(chat_standin, tmp_path):
    """A provider may bill a request whose answer the client never read (it timed out, or its 200 was
    cut off): each such try counts at its worst case, now and in every rerun, so that no sequence of
    attempts can pass max_cost_usd whatever was billed."""
    from genjudge.engine.endpoint.tries import unsettled

    standin = chat_standin({"slow": ("slow", 10.0, {}), "cut": ("cut", None, {})})
    texts = ["fine", "slow", "cut"]
    # "fine" must come back within the timeout: a second, not a tight 0.3 s, on a loaded machine
    c, _ = endpoint_job(standin.url, tmp_path, texts, PRICED, max_attempts=2, timeout=1.0)
    e = c.info["endpoint"]
    assert standin.requests == {"fine": 1, "slow": 2, "cut": 2}
    assert sorted(c.incomplete) == [1, 2] and e["given_up"] == {"timeout": 1, "truncated": 1}
    assert e["unknown_outcome"] == 4 and e["cost_usd"] == pytest.approx(FINE)  # what came back
    # The four tries' worst cases: each request's prompt bound (a token a byte at first, then the
    # ratio the answers showed, with its margin) and its max_new_tokens.
    assert 4 * 8 * 3500 / 1e6 < e["possibly_billed_usd"] < 4 * TRY * 3
    ledger = tmp_path / "store" / "tries" / "w.jsonl"
    assert unsettled(ledger) == (4, pytest.approx(e["possibly_billed_usd"]))
    # Reruns count them as possibly billed by earlier attempts, and stop before the next worst case
    # would pass the budget: never past it, counting every try that got no answer at its worst case.
    total = e["cost_usd"] + e["possibly_billed_usd"]
    for _ in range(20):
        c, _ = endpoint_job(standin.url, tmp_path, texts, PRICED, max_attempts=2, timeout=1.0)
        e = c.info["endpoint"]
        assert e["possibly_billed_usd_earlier_attempts"] == pytest.approx(
            unsettled(ledger)[1] - e["possibly_billed_usd"]
        )
        total += e["cost_usd"] + e["possibly_billed_usd"]
        assert total <= 1.0
        if e["budget_stopped"]:
            break
    assert e["budget_stopped"] and "not sent: max_cost_usd reached" in c.incomplete.values()
    n, usd = unsettled(ledger)
    assert n == standin.requests["slow"] + standin.requests["cut"] and usd + FINE <= 1.0
    assert standin.requests["fine"] == 1
    # The same budget again sends nothing.
    before = dict(standin.requests)
    c, _ = endpoint_job(standin.url, tmp_path, texts, PRICED, max_attempts=2, timeout=1.0)
    assert standin.requests == before and c.info["endpoint"]["budget_stopped"]


def test_a_request_that_never_left_is_not_counted_as_possibly_billed(tmp_path):
    """Nothing listens on the port: a connection refused was never sent, and costs nothing."""
    import socket

    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    c, store = endpoint_job(f"http://127.0.0.1:{port}/v1", tmp_path, ["a"], PRICED, max_attempts=2)
    e = c.info["endpoint"]
    assert e["requests"] == 2 and e["given_up"] == {"connection": 1}
    assert e["unknown_outcome"] == 0 and e["possibly_billed_usd"] == 0
    from genjudge.engine.endpoint.tries import unsettled

    assert unsettled(tmp_path / "store" / "tries" / "w.jsonl") == (0, 0.0)


KILLED_JOB = """
import sys
from genjudge.config.specs import spec_for
from genjudge.engine.endpoint.run import EndpointPromptSet, complete_endpoint
from genjudge.store.item_store import ItemStore

url, store = sys.argv[1], sys.argv[2]
endpoint = {"base_url": url, "check_capabilities": False, "max_wait": 3, "max_connections": 2}
price = {"input_per_mtok": 3500.0, "output_per_mtok": 3500.0}
spec = spec_for("generator", model="gpt-4.1-2025-04-14", engine="openai", max_new_tokens=8, endpoint=endpoint,
                price=price, max_cost_usd=1.0)
complete_endpoint(EndpointPromptSet(spec, "generate"), ["fine", "slow"], ["q0", "q1"], ItemStore(store, "w"), "s", None)
"""


def test_a_job_killed_while_a_request_is_in_flight_leaves_it_counted_for_the_rerun(chat_standin, tmp_path):
    """SIGKILL gives the job no chance to record anything: the try was written down before it was sent,
    and the rerun counts it at its worst case."""
    import subprocess
    import sys

    from genjudge.engine.endpoint.tries import unsettled

    standin = chat_standin({"slow": ("slow", 60.0, {})})
    script = tmp_path / "job.py"
    script.write_text(KILLED_JOB)
    proc = subprocess.Popen([sys.executable, str(script), standin.url, str(tmp_path / "store")])
    sent = lambda: standin.requests.get("slow", 0) >= 1 and standin.requests.get("fine", 0) >= 1  # noqa: E731
    wait_until(sent, "both requests were sent", proc, timeout=60)
    ledger = tmp_path / "store" / "tries" / "w.jsonl"
    settled = '"fine" was answered, stored and settled'
    wait_until(lambda: ledger.exists() and '"settled"' in ledger.read_text(), settled, proc, timeout=60)
    proc.kill()
    proc.wait(30)
    n, usd = unsettled(ledger)
    assert n == 1 and usd > 0  # the slow one: "fine" was answered and settled
    standin.errors.clear()  # the provider answers again
    c, _ = endpoint_job(standin.url, tmp_path, ["fine", "slow"], PRICED)
    e = c.info["endpoint"]
    assert e["possibly_billed_usd_earlier_attempts"] == pytest.approx(usd) and e["completed"] == 1
    assert standin.requests == {"fine": 1, "slow": 2} and [r["output"] for r in c.results] == ["ok", "ok"]


def test_a_failed_capability_probe_still_counts_what_its_tries_were_billed(chat_standin, tmp_path):
    from genjudge.engine.endpoint.probe import PROBE_TEXT, TRIES

    empty = chat_standin({PROBE_TEXT: EMPTY_200})
    with pytest.raises(InputError, match="did not answer the capability probe: incomplete: no choices"):
        endpoint_job(empty.url, tmp_path, ["fine"], PRICED, check_capabilities=True)
    assert empty.requests == {PROBE_TEXT: TRIES}
    ledger = tmp_path / "store" / "probes" / "w.jsonl"
    assert [json.loads(line)["cost_usd"] for line in ledger.read_text().splitlines()] == [pytest.approx(TRIES * TRY)]
    # The rerun (the endpoint fixed) starts from what the failed probe spent.
    fixed = chat_standin({})
    c, _ = endpoint_job(fixed.url, tmp_path, ["fine"], PRICED, check_capabilities=True)
    assert c.info["endpoint"]["cost_usd_earlier_attempts"] == pytest.approx(TRIES * TRY)
    assert [r["output"] for r in c.results] == ["ok"] and fixed.requests == {PROBE_TEXT: 1, "fine": 1}


def test_a_paid_batch_line_that_cannot_be_kept_counts_at_the_batch_price(chat_standin, tmp_path):
    from batch_standin import BatchStandIn

    chat = chat_standin({"empty": EMPTY_200})
    batches = BatchStandIn(chat.url, shuffle=False)
    try:
        c, _ = endpoint_job(
            batches.url, tmp_path, ["fine", "empty"], PRICED, batch=True, batch_poll_seconds=0.05, max_attempts=2
        )
    finally:
        batches.stop()
    e = c.info["endpoint"]
    assert list(c.incomplete) == [1] and batches.uploads == 2 and chat.requests["empty"] == 2
    assert e["unkept"] == 2 and e["cost_usd"] == pytest.approx((2 * TRY + FINE) * 0.5)
    assert len((tmp_path / "store" / "unkept" / "w.jsonl").read_text().splitlines()) == 2


def test_a_batch_whose_creation_got_no_answer_is_adopted_when_the_list_shows_it_late(chat_standin, tmp_path):
    """The answer to POST /v1/batches is lost and the provider's list shows the batch only 3 s later:
    the sender keeps looking (up to ADOPT_GRACE after the upload) and adopts it instead of submitting
    its lines again, which would pay for them twice."""
    from batch_standin import BatchStandIn

    from genjudge.engine.endpoint.batch import ADOPT_GRACE

    assert ADOPT_GRACE >= 60
    chat = chat_standin({})
    batches = BatchStandIn(chat.url, shuffle=False, drop_create=True, list_lag=3.0)
    try:
        c, _ = endpoint_job(batches.url, tmp_path, ["a", "b"], batch=True, batch_poll_seconds=0.1)
    finally:
        batches.stop()
    assert [r and r["output"] for r in c.results] == ["ok", "ok"]
    assert batches.uploads == batches.creations == 1 and batches.listed >= 2
    assert chat.requests == {"a": 1, "b": 1} and c.info["endpoint"]["batches"] == batches.created_ids()


def test_a_file_no_listing_shows_past_the_grace_was_never_submitted(chat_standin, tmp_path, monkeypatch):
    from batch_standin import BatchStandIn

    from genjudge.engine.endpoint import batch

    monkeypatch.setattr(batch, "ADOPT_GRACE", 0.5)  # the list 5 s behind: past the grace, a new file
    chat = chat_standin({})
    batches = BatchStandIn(chat.url, shuffle=False, drop_create=True, list_lag=5.0)
    try:
        c, _ = endpoint_job(batches.url, tmp_path, ["a", "b"], batch=True, batch_poll_seconds=0.1)
    finally:
        batches.stop()
    assert [r and r["output"] for r in c.results] == ["ok", "ok"]
    assert batches.uploads == batches.creations == 2 and len(c.info["endpoint"]["batches"]) == 1


class CountedKey(str):
    """An item key that counts how often it is hashed: how many set and dict look-ups a pass makes."""

    hashed = 0

    def __hash__(self):
        CountedKey.hashed += 1
        return str.__hash__(self)


def test_what_a_job_computed_is_found_in_one_pass_over_its_items():
    n = 2000
    keys = [CountedKey(f"k{i}") for i in range(n)]
    todo = list(range(0, n, 2))  # sent now; the odd ones were stored earlier
    done = {k: {"n_generated_tokens": 3} for j, k in enumerate(keys) if j % 4 != 2}  # every other sent one failed
    CountedKey.hashed = 0
    tokens, computed = computed_of(keys, todo, done)
    hashed = CountedKey.hashed
    assert computed == {keys[i] for i in range(0, n, 4)} and tokens == 3 * len(computed)
    # A few look-ups an item, not one per stored item and sent item (a set built per stored item: n * n / 2).
    assert hashed < 10 * n


# --- the MT-bench example: FastChat's GPT-4 grading --------------------------------------------------


def fastchat_prompts() -> dict:
    lines = (ROOT / "tests/data/fastchat/judge_prompts_single.jsonl").read_text().splitlines()
    return {p["name"]: p for p in map(json.loads, lines)}


EXAMPLE = ROOT / "config/examples/mt_bench_gpt4.yaml"


def test_the_mt_bench_example_sends_fastchats_gpt4_messages():
    cfg = wfconfig.validate(yaml.safe_load(EXAMPLE.read_text()))
    spec = JudgeSpec.from_config(cfg["judge"])
    mode = modes.get(spec.mode)
    templates = Templates(
        str(ROOT / spec.template), [{**r, "template": str(ROOT / r["template"])} for r in spec.templates], mode
    )
    fc = fastchat_prompts()
    history = [
        {"question": "What is 2+2?", "reference": "4", "answer": "It is 4."},
        {"question": "And 3+3?", "reference": "6", "answer": "Six."},
    ]
    cases = [
        ("writing", 1, "single-v1"),
        ("math", 1, "single-math-v1"),
        ("writing", 2, "single-v1-multi-turn"),
        ("coding", 2, "single-math-v1-multi-turn"),
    ]
    for category, turn, name in cases:
        path, system = templates.choice(category, turn)
        text = render_request(
            templates.texts[path],
            "item",
            question=history[turn - 1]["question"],
            answer=history[turn - 1]["answer"],
            candidate=history[turn - 1]["answer"],
            reference=history[turn - 1]["reference"],
            turn=turn,
            **placeholders(history[:turn]),
        )
        # FastChat (gen_judgment.py, run_judge_single): system message, then prompt_template.format(...).
        kwargs = {"question": history[0]["question"], "answer": history[0]["answer"], "ref_answer_1": "4"}
        if turn == 2:
            kwargs = {
                "question_1": "What is 2+2?",
                "question_2": "And 3+3?",
                "answer_1": "It is 4.",
                "answer_2": "Six.",
                "ref_answer_1": "4",
                "ref_answer_2": "6",
            }
        assert (system or spec.system_prompt) == fc[name]["system_prompt"], name
        assert text == fc[name]["prompt_template"].format(**kwargs), name
    assert (
        spec.max_new_tokens == 2048 and spec.verdict_pattern == r"\[\[(\d+\.?\d*)\]\]" and not moving_alias(spec.model)
    )


@pytest.mark.workflow
def test_the_mt_bench_example_dry_runs_and_plans_without_the_key(workflow):
    from conftest import clean_env, genjudge_cli
    from test_examples import mt_bench_fixture, stand_in_models

    cfg = yaml.safe_load(EXAMPLE.read_text())
    stand_in_models(workflow, {"generator": cfg["generator"], "judge": {}})  # the generator is local, the judge not
    mt_bench_fixture(workflow.path / cfg["dataset"]["path"])
    cfg["lock_dir"] = str(workflow.lock_dir)
    path = workflow.path / "config" / "gpt4.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in clean_env().items() if k != "OPENAI_API_KEY"}
    out = workflow.run("-n", "--configfile", path, "--quiet", "rules", env=env).stdout
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert jobs["generate"] == "4" and jobs["judge"] == "1"
    assert not (workflow.path / "gpt-4-0613").exists()  # nothing looked for a model directory
    plan = genjudge_cli("plan", "--configfile", path, cwd=workflow.path, env=env)
    assert plan.returncode == 0, plan.stderr[-3000:]
    text = plan.stdout
    assert "gpt-4-0613 behind https://api.openai.com/v1 (engine: openai): no GPU, no model files read" in text
    assert "key: $OPENAI_API_KEY in the jobs' environment (not needed to plan)" in text
    # 16 two-turn questions: 32 requests; the cost at $30/$60 per million tokens, answers at 2048 tokens at most.
    found = re.search(r"each about 32 requests, ([\d,]+) prompt tokens .* at most 65,536 completion tokens", text)
    assert found, text
    prompt = int(found.group(1).replace(",", ""))
    cost = re.search(r"cost of judge judge: about \$([\d.,]+)", text.replace("gpt-4-0613", "judge")).group(1)
    assert float(cost.replace(",", "")) == pytest.approx((prompt * 30 + 65_536 * 60) / 1e6, abs=0.01)
    assert "max_cost_usd: 150 per job: enough" in text
    assert "16 at a time, at an assumed 5 s each" in text
