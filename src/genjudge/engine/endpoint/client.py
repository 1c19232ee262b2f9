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
from genjudge.engine.endpoint.cost import Budget, BudgetReached, BudgetWait
from genjudge.engine.endpoint.requests import FilteredAnswer, Incomplete, LogprobVerdict, result, split
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
    refused: str | None = None  # a 4xx that every request would get, or the circuit breaker: the job stops
    unkept: int = 0  # 200s billed and thrown away (no logprobs, no choice): retried, and counted as spent
    unknown: int = 0  # tries sent with no answer (timed out, dropped, cut off, stopped in flight): possibly billed
    filtered: int = 0  # answers the provider withheld (content_filter, only tool calls), failed or counted wrong
    usage_missing: int = 0  # answers kept without usage: possibly billed at their worst case
    requests: int = 0  # tries sent, successes and failures
    retries: Counter = field(default_factory=Counter)  # cause -> failed tries that were retried
    given_up: Counter = field(default_factory=Counter)  # cause -> items left for a rerun
    wait_seconds: float = 0.0
    seconds: float = 0.0
    served_models: Counter = field(default_factory=Counter)
    fingerprints: Counter = field(default_factory=Counter)
    lowest_concurrency: float | None = None
    rate_limit_cuts: int = 0
    budget_waits: int = 0  # requests that waited for those in flight near the end of the budget
    stored_for_others: int = 0  # batch lines of another job's items, paid, stored for that job


# Failures that the next item will most likely meet too (a proxy that strips what was asked, a filter on
# the template): where the first BREAKER distinct items all meet one with no success between them, the job
# stops instead of paying for every item's tries.
NON_TRANSIENT = ("incomplete", "content_filter", "tool_calls")
BREAKER = 5


def make_client(endpoint: Endpoint, key: str):
    import openai

    # One line per request would drown the retries and the progress in the job's log.
    for name in ("httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Redirects are not followed (policy.redirected): the prompt goes only where base_url says.
    http = openai.DefaultAsyncHttpxClient(follow_redirects=False, timeout=endpoint.timeout)
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=key,
        max_retries=0,
        timeout=endpoint.timeout,
        default_headers=endpoint.headers() or None,
        http_client=http,
    )


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


async def send_once(client, body: dict, verdict: LogprobVerdict | None, prefill: bool, reasoning=None) -> dict:
    """One try: the result, or an exception of the policy (Retry, TooLong, Filtered, Refused) or a
    FilteredAnswer (the provider withheld the answer of a 200)."""
    known, extra = split(body)
    with api_errors():
        response = await client.chat.completions.create(**known, extra_body=extra or None)
    try:
        return result(response.model_dump(), verdict, prefill, reasoning)
    except Incomplete as exc:
        raise policy.Retry("incomplete", str(exc), usage=exc.usage) from None


def charge(budget: Budget, token, body: dict, usage: tuple[int, int] | None, report: Report, on_unkept) -> None:
    """A 200 the job could not keep: what it was billed is spent, and recorded so that a rerun counts it;
    one that says nothing of its usage counts at its worst case."""
    report.unkept += 1
    if usage is None:
        cost = budget.unbilled(token, body)
    else:
        cost = budget.paid(token, body, *usage)
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
        reasoning: tuple | None = None,
        hints: dict | None = None,
    ):
        self.endpoint = endpoint
        self.budget = budget
        self.tries = tries or Tries(None)  # each try written before it is sent, settled once its outcome is known
        # [(index, result), ...] -> None: stores them durably (one fsync a call). Results that arrive while a
        # call runs (in a thread: the event loop goes on sending) are stored together by the next call.
        self.on_results = (
            on_result if getattr(on_result, "batched", False) else (lambda got: [on_result(*x) for x in got])
        )
        self.on_unkept = on_unkept  # (cost) -> None: a paid answer thrown away, recorded for later attempts
        self.verdict = verdict
        self.names = names  # each request's item, for the log
        self.desc = desc
        self.reasoning = reasoning  # the (open, close) markers a separate reasoning trace is kept between
        self.hints = hints or {}  # cause -> the setting that would have caught it, for the circuit breaker
        self.rng = random.Random(seed)
        self.report = Report()
        self.waiting = 0  # requests sleeping before a retry
        self._unstored: list = []  # (index, result, try id, future) waiting for the next store call
        self._storing = None  # the task that stores them
        self.failing: dict = {}  # non-transient cause -> the distinct items it hit since the last success

    def run(self, bodies: list[dict], key: str) -> Report:
        return asyncio.run(self._run(bodies, key))

    async def _run(self, bodies: list[dict], key: str) -> Report:
        t0 = time.monotonic()
        self.concurrency = policy.Concurrency(self.endpoint.max_connections)
        self.client = make_client(self.endpoint, key)
        self.stop = asyncio.Event()
        self._changed = asyncio.Event()  # set whenever a try's cost is settled: the budget may let one more go
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

    def _settled(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _give_up(self, i: int, cause: str, why: str) -> None:
        r = self.report
        r.failed[i], r.given_up[cause] = why, r.given_up[cause] + 1
        log.error("%s: %s", self._name(i), why)

    def _breaker(self, i: int, cause: str, message: str) -> None:
        """Count a non-transient failure; stop the job where the first BREAKER distinct items met it."""
        hit = self.failing.setdefault(cause, set())
        hit.add(i)
        if len(hit) < BREAKER or self.report.refused is not None:
            return
        hint = self.hints.get(cause, "")
        self.report.refused = (
            f"the requests of {len(hit)} items in a row failed the same way with no success between them "
            f"({cause}: {message[:300]}); nothing more is sent, so that no more is paid for answers that are "
            f"thrown away" + (f"; {hint}" if hint else "")
        )
        log.error("%s: %s", self.desc, self.report.refused)
        self.stop.set()

    async def _reserve(self, i: int, body: dict, token) -> tuple[bool, float | None, float]:
        """(whether to go on, the try's worst case, when it was let through): a slot, then the budget;
        near the end of the budget a request waits for those in flight rather than stopping the job."""
        r = self.report
        while True:
            if self.stop.is_set():
                r.unsent.append(i)
                return False, None, 0.0
            sent_at = await self.concurrency.acquire()  # then the budget: only what is in flight is set aside
            changed = self._changed
            try:
                at_most = self.budget.reserve(token, body)
            except BudgetWait:
                await self.concurrency.release()
                r.budget_waits += 1
                await changed.wait()
                continue
            except BudgetReached as exc:
                await self.concurrency.release()
                if not self.stop.is_set():
                    log.warning("%s: budget reached, no more requests are sent: %s", self.desc, exc)
                self.stop.set()
                self._settled()
                r.unsent.append(i)
                return False, None, 0.0
            if self.stop.is_set():
                self.budget.release(token)
                await self.concurrency.release()
                r.unsent.append(i)
                return False, None, 0.0
            return True, at_most, sent_at

    async def _item(self, i: int, body: dict) -> None:
        r, tries, waited, limited = self.report, 0, 0.0, 0
        while True:
            token = object()
            going, at_most, sent_at = await self._reserve(i, body, token)
            if not going:
                return
            tries += 1
            r.requests += 1
            tid = self.tries.sent(at_most)
            try:
                res = await send_once(self.client, body, self.verdict, self.endpoint.prefill, self.reasoning)
            except policy.Retry as exc:
                await self._failed_try(exc, token, body, tid, sent_at)
                if policy.says_not_now(exc):
                    limited += 1
                wait = self._retry_wait(i, exc, tries, limited, waited)
                if wait is None:
                    return
                waited += wait
                await self._wait_before_retry(wait)
                continue
            except FilteredAnswer as exc:
                await self._filtered(i, exc, token, body, tid)
                return
            except policy.TooLong as exc:
                await self._free(token, tid)
                r.too_long[i] = redact(str(exc))[:500]
                return
            except policy.Filtered as exc:
                # This prompt's own text: the same request would be refused again, the other items may pass.
                await self._free(token, tid)
                why = f"refused by the provider's content filter (not retried): {redact(str(exc))[:500]}"
                r.filtered += 1
                self._give_up(i, "content_filter", why)
                self._breaker(i, "content_filter", why)
                return
            except policy.Refused as exc:
                await self._free(token, tid)
                if r.refused is None:
                    r.refused = redact(str(exc))
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
            self.failing.clear()
            self._priced(i, res, token, body, tries)
            self._settled()
            await self._store(i, res, tid)
            return

    async def _free(self, token, tid) -> None:
        """A try that cost nothing: its budget and slot are free again."""
        self.budget.release(token)
        self.tries.settled(tid)
        self._settled()
        await self.concurrency.release()

    async def _failed_try(self, exc: policy.Retry, token, body: dict, tid, sent_at: float) -> None:
        """Settle a try that may be tried again: what it cost, its slot, a rate limit's cut."""
        r = self.report
        if exc.usage is not None or exc.cause == "incomplete":  # billed though not kept: spent all the same
            charge(self.budget, token, body, exc.usage, r, self.on_unkept)
            self.tries.settled(tid)
        elif exc.unknown:  # may have been billed: its worst case stays counted, here and in later attempts
            self.budget.unknown(token)
            r.unknown += 1
        else:
            self.budget.release(token)
            self.tries.settled(tid)
        self._settled()
        await self.concurrency.release()
        if exc.cause == "429":
            self.concurrency.rate_limited(sent_at)

    def _retry_wait(self, i: int, exc: policy.Retry, tries: int, limited: int, waited: float) -> float | None:
        """The seconds to wait before the next try, or None where the item stops here (given up, or the job
        stopping)."""
        r = self.report
        message = redact(str(exc))
        if exc.cause in NON_TRANSIENT:
            self._breaker(i, exc.cause, message)
        # A rate limit says "not now": its tries are bounded by max_wait alone, the others' by max_attempts.
        if tries - limited >= self.endpoint.max_attempts:
            self._give_up(i, exc.cause, f"gave up after {tries} tries ({waited:.0f} s of waiting): last {message}")
            return None
        wait = policy.wait_for(exc, tries - 1, self.rng)
        if waited + wait > self.endpoint.max_wait:
            self._give_up(
                i,
                exc.cause,
                f"gave up after {tries} tries: the next wait ({wait:.0f} s) would pass endpoint.max_wait "
                f"({self.endpoint.max_wait:g} s, {waited:.0f} s waited); last {message}",
            )
            return None
        if self.stop.is_set():
            r.unsent.append(i)
            return None
        r.retries[exc.cause] += 1
        log.info(
            "%s: try %d failed (%s); retry in %.1f s (retries so far: %s)",
            self._name(i),
            tries,
            message[:300],
            wait,
            dict(r.retries),
        )
        return wait

    async def _wait_before_retry(self, wait: float) -> None:
        """Sleep `wait` seconds, or less where the job stops meanwhile."""
        self.report.wait_seconds += wait
        self.waiting += 1
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=wait)
        except asyncio.TimeoutError:
            pass
        self.waiting -= 1

    async def _store(self, i: int, res: dict, tid) -> None:
        """Store a result durably, then settle its try: a kill between the two counts it twice, never not at
        all. Results are grouped: each store call (one fsync) takes every result that arrived meanwhile."""
        done = asyncio.get_running_loop().create_future()
        self._unstored.append((i, res, tid, done))
        if self._storing is None or self._storing.done():
            self._storing = asyncio.create_task(self._store_all())
        await done

    async def _store_all(self) -> None:
        while self._unstored:
            batch, self._unstored = self._unstored, []
            try:
                await asyncio.to_thread(self.on_results, [(i, res) for i, res, _, _ in batch])
            except BaseException as exc:  # every waiter fails as its own store would have
                for *_, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for _, _, tid, done in batch:
                self.tries.settled(tid)
                self.report.done += 1
                done.set_result(None)

    def _priced(self, i: int, res: dict, token, body: dict, tries: int) -> None:
        """A usable answer priced (at its worst case where it says nothing of its usage)."""
        r = self.report
        if res.get("usage_missing"):
            res["cost_usd"] = None
            res["possibly_billed_usd"] = self.budget.unbilled(token, body)
            r.usage_missing += 1
        else:
            res["cost_usd"] = self.budget.paid(
                token,
                body,
                res["n_prompt_tokens"],
                res["completion_tokens"],
                cached_tokens=res.get("cached_tokens", 0),
                reasoning_tokens=res.get("reasoning_tokens", 0),
            )
        res["attempts"] = tries
        r.served_models[res.get("served_model")] += 1
        r.fingerprints[res.get("system_fingerprint")] += 1

    async def _filtered(self, i: int, exc: FilteredAnswer, token, body: dict, tid) -> None:
        """The provider withheld a 200's answer: billed all the same; the item fails (on_filtered: fail,
        left for a rerun like a refused prompt) or is kept as a withheld answer (count_wrong)."""
        r = self.report
        r.filtered += 1
        cause = exc.partial["finish_reason"]
        if self.endpoint.on_filtered == "count_wrong":
            await self.concurrency.release()
            kept = dict(exc.partial)
            self._priced(i, kept, token, body, 1)
            self._settled()
            await self._store(i, kept, tid)
            return
        charge(self.budget, token, body, exc.usage, r, self.on_unkept)
        r.unkept -= 1  # counted as filtered, not as an answer thrown away for want of what was asked
        await self.concurrency.release()
        self._give_up(i, cause, f"{exc} (endpoint.on_filtered: fail; a rerun asks again)")
        self._breaker(i, cause, str(exc))
        self.tries.settled(tid)
        self._settled()

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
