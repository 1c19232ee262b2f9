"""Send a job's requests to an endpoint: many in flight, each retried by the policy, each success
handed to `on_result` as soon as it arrives (the caller stores it before anything else happens).

The `openai` client sends them (`AsyncOpenAI`, its own retries off: the policy here retries, and the
client would honour a `Retry-After` only up to two minutes). A failed try never becomes a result.
Every retry is logged with its cause and count, and a progress line every `PROGRESS_SECONDS` says
what is done, waiting and retrying, so a slow run never looks stuck.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from genjudge.engine.endpoint import policy
from genjudge.engine.endpoint.cost import Budget, BudgetReached
from genjudge.engine.endpoint.requests import Incomplete, LogprobVerdict, result, split
from genjudge.engine.endpoint.settings import Endpoint, redact
from genjudge.engine.endpoint.tries import Tries

log = logging.getLogger("endpoint")
PROGRESS_SECONDS = 10.0


@dataclass
class Report:
    """What happened to a job's requests: their outcomes and the counts the meta and the report show."""

    done: int = 0
    too_long: dict = field(default_factory=dict)  # index -> the server's message
    failed: dict = field(default_factory=dict)  # index -> why it was given up (retry budget spent, content filter)
    unsent: list = field(default_factory=list)  # indices the budget stopped before they were sent
    refused: str | None = None  # a 4xx that every request would get: the job stops
    unkept: int = 0  # 200s billed and thrown away (no logprobs, no choice): retried, and counted as spent
    unknown: int = 0  # tries sent with no answer (timed out, dropped, cut off, stopped in flight): possibly billed
    requests: int = 0  # tries sent, successes and failures
    retries: Counter = field(default_factory=Counter)  # cause -> failed tries that were retried
    given_up: Counter = field(default_factory=Counter)  # cause -> items left for a rerun
    wait_seconds: float = 0.0
    seconds: float = 0.0
    served_models: Counter = field(default_factory=Counter)
    fingerprints: Counter = field(default_factory=Counter)
    lowest_concurrency: float | None = None
    rate_limit_cuts: int = 0


def make_client(endpoint: Endpoint, key: str):
    from openai import AsyncOpenAI

    # One line per request would drown the retries and the progress in the job's log.
    for name in ("httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)

    return AsyncOpenAI(base_url=endpoint.base_url, api_key=key, max_retries=0, timeout=endpoint.timeout)


@contextmanager
def api_errors():
    """The openai client's errors as the policy's: Retry, TooLong, Filtered or Refused. A 200 whose body
    is cut off reaches here as a bare JSONDecodeError, not as one of the client's own errors."""
    import openai

    try:
        yield
    except openai.APIStatusError as exc:
        # The error's code tells a content filter or a spent quota from the other 4xx (some proxies keep only its type).
        code = exc.code or exc.type
        raise policy.classify(exc.status_code, str(exc.message), exc.response.headers, code) from None
    except openai.APITimeoutError as exc:
        raise policy.Retry("timeout", unknown=reached_server(exc)) from None
    except openai.APIConnectionError as exc:
        raise policy.Retry("connection", str(exc), unknown=reached_server(exc)) from None
    except (json.JSONDecodeError, openai.APIResponseValidationError) as exc:
        raise policy.Retry("truncated", str(exc)[:200], unknown=True) from None


# The transport's errors of a request that never left (httpx's and httpx2's names): nothing was billed.
NOT_SENT = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout"})


def reached_server(exc: BaseException) -> bool:
    """Whether a timeout or connection error came after the request was sent (the client's error
    is raised from the transport's)."""
    return type(exc.__cause__).__name__ not in NOT_SENT


async def send_once(client, body: dict, verdict: LogprobVerdict | None, prefill: bool) -> dict:
    """One try: the result, or an exception of the policy (Retry, TooLong, Filtered, Refused)."""
    known, extra = split(body)
    with api_errors():
        response = await client.chat.completions.create(**known, extra_body=extra or None)
    try:
        return result(response.model_dump(), verdict, prefill)
    except Incomplete as exc:
        raise policy.Retry("incomplete", str(exc), usage=exc.usage) from None


def charge(budget: Budget, token, body: dict, usage: tuple[int, int], report: Report, on_unkept) -> None:
    """A 200 the job could not keep: what it was billed is spent, and recorded so that a rerun counts it."""
    cost = budget.paid(token, body, *usage)
    report.unkept += 1
    if on_unkept is not None and cost:
        on_unkept(cost)


class Sender:
    def __init__(
        self,
        endpoint: Endpoint,
        budget: Budget,
        on_result,
        verdict: LogprobVerdict | None = None,
        names: list[str] | None = None,
        desc: str = "requests",
        seed: int = 0,
        on_unkept=None,
        tries: Tries | None = None,
    ):
        self.endpoint = endpoint
        self.budget = budget
        self.tries = tries or Tries(None)  # each try written before it is sent, settled once its outcome is known
        self.on_result = on_result  # (index, result) -> None, called before the next result is handled
        self.on_unkept = on_unkept  # (cost) -> None: a paid answer thrown away, recorded for later attempts
        self.verdict = verdict
        self.names = names  # each request's item, for the log
        self.desc = desc
        self.rng = random.Random(seed)
        self.report = Report()
        self.waiting = 0  # requests sleeping before a retry

    def run(self, bodies: list[dict], key: str) -> Report:
        return asyncio.run(self._run(bodies, key))

    async def _run(self, bodies: list[dict], key: str) -> Report:
        t0 = time.monotonic()
        self.concurrency = policy.Concurrency(self.endpoint.max_connections)
        self.client = make_client(self.endpoint, key)
        self.secrets = [key]
        self.stop = asyncio.Event()
        ticker = asyncio.create_task(self._progress(len(bodies)))
        try:
            async with self.client:
                await asyncio.gather(*(self._item(i, b) for i, b in enumerate(bodies)))
        finally:
            ticker.cancel()
            self.tries.close()
        r = self.report
        r.seconds = time.monotonic() - t0
        r.lowest_concurrency = self.concurrency.lowest
        r.rate_limit_cuts = self.concurrency.cuts
        return r

    def _name(self, i: int) -> str:
        return f"item {self.names[i]!r}" if self.names else f"request {i}"

    async def _item(self, i: int, body: dict) -> None:
        r, tries, waited, limited = self.report, 0, 0.0, 0
        while True:
            if self.stop.is_set():
                r.unsent.append(i)
                return
            token = object()
            sent_at = await self.concurrency.acquire()  # then the budget: only what is in flight is set aside
            try:
                at_most = self.budget.reserve(token, body)
            except BudgetReached as exc:
                await self.concurrency.release()
                if not self.stop.is_set():
                    log.warning("%s: budget reached, no more requests are sent: %s", self.desc, exc)
                self.stop.set()
                r.unsent.append(i)
                return
            if self.stop.is_set():
                self.budget.release(token)
                await self.concurrency.release()
                r.unsent.append(i)
                return
            tries += 1
            r.requests += 1
            tid = self.tries.sent(at_most)
            try:
                res = await send_once(self.client, body, self.verdict, self.endpoint.prefill)
            except policy.Retry as exc:
                if exc.usage is not None:  # billed though not kept: spent all the same
                    charge(self.budget, token, body, exc.usage, r, self.on_unkept)
                    self.tries.settled(tid)
                elif exc.unknown:  # may have been billed: its worst case stays counted, here and in later attempts
                    self.budget.unknown(token)
                    r.unknown += 1
                else:
                    self.budget.release(token)
                    self.tries.settled(tid)
                await self.concurrency.release()
                if exc.cause == "429":
                    self.concurrency.rate_limited(sent_at)
                    limited += 1
                message = redact(str(exc), self.secrets)
                # A rate limit says "not now": its tries are bounded by max_wait alone, the others' by max_attempts.
                if tries - limited >= self.endpoint.max_attempts:
                    why = f"gave up after {tries} tries ({waited:.0f} s of waiting): last {message}"
                    r.failed[i], r.given_up[exc.cause] = why, r.given_up[exc.cause] + 1
                    log.error("%s: %s", self._name(i), why)
                    return
                wait = policy.wait_for(exc, tries - 1, self.rng)
                if waited + wait > self.endpoint.max_wait:
                    why = (
                        f"gave up after {tries} tries: the next wait ({wait:.0f} s) would pass endpoint.max_wait "
                        f"({self.endpoint.max_wait:g} s, {waited:.0f} s waited); last {message}"
                    )
                    r.failed[i], r.given_up[exc.cause] = why, r.given_up[exc.cause] + 1
                    log.error("%s: %s", self._name(i), why)
                    return
                r.retries[exc.cause] += 1
                log.info(
                    "%s: try %d failed (%s); retry in %.1f s (retries so far: %s)",
                    self._name(i),
                    tries,
                    message[:300],
                    wait,
                    dict(r.retries),
                )
                waited += wait
                r.wait_seconds += wait
                self.waiting += 1
                try:
                    await asyncio.wait_for(self.stop.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
                self.waiting -= 1
                continue
            except policy.TooLong as exc:
                self.budget.release(token)
                self.tries.settled(tid)
                await self.concurrency.release()
                r.too_long[i] = redact(str(exc), self.secrets)[:500]
                return
            except policy.Filtered as exc:
                # This prompt's own text: the same request would be refused again, the other items may pass.
                self.budget.release(token)
                self.tries.settled(tid)
                await self.concurrency.release()
                why = f"refused by the provider's content filter (not retried): {redact(str(exc), self.secrets)[:500]}"
                r.failed[i], r.given_up["content_filter"] = why, r.given_up["content_filter"] + 1
                log.error("%s: %s", self._name(i), why)
                return
            except policy.Refused as exc:
                self.budget.release(token)
                self.tries.settled(tid)
                await self.concurrency.release()
                if r.refused is None:
                    r.refused = redact(str(exc), self.secrets)
                    log.error("%s: %s refused: %s; no more requests are sent", self.desc, self._name(i), r.refused)
                self.stop.set()
                r.unsent.append(i)
                return
            except BaseException:  # stopped (Ctrl-C, SIGTERM) while in flight: it may be billed all the same
                self.budget.unknown(token)
                r.unknown += 1
                await self.concurrency.release()
                raise
            await self.concurrency.release()
            await self.concurrency.succeeded()
            res["cost_usd"] = self.budget.paid(token, body, res["n_prompt_tokens"], res["completion_tokens"])
            res["attempts"] = tries
            r.served_models[res.get("served_model")] += 1
            r.fingerprints[res.get("system_fingerprint")] += 1
            self.on_result(i, res)  # stored first: a kill between the two counts it twice, never not at all
            self.tries.settled(tid)
            r.done += 1
            return

    async def _progress(self, total: int) -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            r = self.report
            b = self.budget
            spent = f", ${b.spent:.4f} spent" if b.price.known else ""
            spent += (
                f" and up to ${b.possibly:.4f} possibly billed by {r.unknown} tries with no answer" if r.unknown else ""
            )
            log.info(
                "%s: %d/%d done, %d in flight, %d waiting to retry, concurrency %d of %d, retries %s%s",
                self.desc,
                r.done,
                total,
                self.concurrency.active,
                self.waiting,
                int(self.concurrency.limit),
                self.concurrency.maximum,
                dict(r.retries) or "none",
                spent,
            )
