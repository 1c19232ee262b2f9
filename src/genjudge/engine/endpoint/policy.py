"""What is retried, how long to wait, and how many requests may be in flight.

Retried: 408, 409, 429 and 5xx answers, timeouts, dropped connections, a 200 whose body is cut off
(the client raises a bare JSONDecodeError for it) and a 200 that lacks what the request asked for
(logprobs a proxy stripped). Never retried: a context-length refusal (the item is too long: its
dataset's `on_too_long` decides), a content filter's refusal of one prompt (that item is given up and
the others go on), a 429 that says the account's quota is spent (waiting will not bring it back: the
job stops) and other 4xx answers (the request is wrong: every item would fail the same way, so the
job stops).

The wait before a retry is what the server asked for (`Retry-After`, `retry-after-ms`, OpenAI's
`x-ratelimit-reset-requests`/`-tokens`) and up to as long again at random, or else exponential backoff
with full jitter; each item's failed tries (`max_attempts`, rate limits not counted: they say "not
now") and total wait (`max_wait`) are bounded, after which it is left for a rerun.

Concurrency starts at `max_connections`, falls by a tenth where rate limits are more than a fifth of
the latest round's answers and climbs back by one request per round of successes (additive increase,
multiplicative decrease, as TCP and inspect_ai do); a burst of 429s from requests sent before the last
cut counts as one.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections import deque

RETRIED_STATUS = {408, 409, 429}
BACKOFF_BASE = 1.0  # seconds before the first retry without a server's hint
BACKOFF_CAP = 60.0
CUT = 0.9
JITTER_FLOOR = 0.1  # seconds: the spread of retries after a server's very short wait
CUT_SHARE = 0.2  # of a round's answers rate-limited, above which the concurrency is cut
MIN_ROUND = 8  # answers a round counts at least

CONTEXT = re.compile(
    r"context[ _]length|maximum context|context window|too many tokens|prompt is too long|"
    r"input is too long|reduce the length|max_model_len|exceeds? the model",
    re.I,
)

# A provider's content filter refusing one prompt (Azure's content_filter, OpenAI's invalid_prompt): the
# item's own text, which the other items do not share.
FILTERED_CODES = {"content_filter", "invalid_prompt", "content_policy_violation"}
FILTERED = re.compile(r"content management policy|flagged as potentially violating|content[ _]policy", re.I)
# A 429 that no wait ends: the account has no credit left.
QUOTA_CODES = {"insufficient_quota"}
QUOTA = re.compile(r"exceeded your current quota", re.I)


class TooLong(Exception):
    """The server refused the request as longer than the model's context."""


class Filtered(Exception):
    """The server's content filter refused this request's prompt: another try gets the same answer, and
    the other items may pass."""


class Refused(Exception):
    """A 4xx the same request would get again (bad parameter, unknown model, refused key)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Retry(Exception):
    """A failed try worth another: `cause` names it in the log and the meta; `after` is the server's
    requested wait in seconds, where it said one; `usage`: the (prompt, completion) tokens a 200 that
    could not be kept was billed, which the budget counts; `unknown`: the request reached the server and
    no usage came back (a timeout while it answered, a dropped connection, a cut-off 200), so it may
    have been billed."""

    def __init__(self, cause: str, message: str = "", after: float | None = None, usage=None, unknown=False):
        super().__init__(f"{cause}: {message}" if message else cause)
        self.cause = cause
        self.after = after
        self.usage = usage
        self.unknown = unknown
        self.longest = after  # the longest wait the server's headers state (policy.longest_wait)


def duration(text: str | None) -> float | None:
    """OpenAI's reset headers: `1s`, `6m0s`, `20ms`, `1h2m3.5s`, or plain seconds."""
    if not text:
        return None
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def server_wait(headers) -> float | None:
    """Seconds the server asks us to wait before trying again, or None where it says nothing."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    after = headers.get("retry-after")
    if after is not None:
        try:
            return max(0.0, float(after))
        except ValueError:
            parsed = email.utils.parsedate_tz(after)
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    # OpenAI's resets of its two limits: the wait is that of the limit that is spent (none left, or not
    # said), not the longer one: a token bucket's "6m0s" would otherwise hold back a request-rate refusal.
    resets = []
    for limit in ("requests", "tokens"):
        reset = duration(headers.get(f"x-ratelimit-reset-{limit}"))
        if reset is not None:
            resets.append((_spent(headers.get(f"x-ratelimit-remaining-{limit}")), reset))
    spent = [r for s, r in resets if s]
    return max(spent) if spent else min((r for _, r in resets), default=None)


def longest_wait(headers) -> float | None:
    """The longest wait any of the server's headers states (a server that sends `retry-after: 1` beside
    `retry-after-ms: 300` asks for a wait worth waiting)."""
    if headers is None:
        return None
    waits = [server_wait({name: headers.get(name)}) for name in ("retry-after-ms", "retry-after")]
    waits.append(server_wait({k: headers.get(k) for k in RESET_HEADERS if headers.get(k) is not None} or None))
    waits = [w for w in waits if w is not None]
    return max(waits) if waits else None


RESET_HEADERS = (
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
)


def _spent(remaining: str | None) -> bool:
    try:
        return remaining is None or int(float(remaining)) <= 0
    except ValueError:
        return True


def classify(status: int, message: str, headers, code: str | None = None) -> Exception:
    """The exception for an HTTP error answer: Retry, TooLong, Filtered or Refused. `code`: the error
    body's `code`, where it has one."""
    message = message or ""
    if 300 <= status < 400:
        return redirected(status, headers)
    if status == 400 and code not in FILTERED_CODES and CONTEXT.search(message):
        return TooLong(message)
    if status == 400 and (code in FILTERED_CODES or FILTERED.search(message)):
        return Filtered(f"HTTP 400: {message[:2000]}")
    if status == 429 and (code in QUOTA_CODES or QUOTA.search(message)):
        return Refused(status, message[:2000])
    if status in RETRIED_STATUS or status >= 500:
        retry = Retry(str(status), message[:300], server_wait(headers))
        retry.longest = longest_wait(headers)
        return retry
    return Refused(status, message[:2000])


def backoff(attempt: int, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)] (attempt from 0)."""
    return rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))


def wait_for(error: Retry, attempt: int, rng: random.Random) -> float:
    """The server's wait, at least BACKOFF_BASE (a `retry-after-ms: 1` would otherwise make a try every few
    milliseconds), and up to as long again at random (the requests it refused together then come back
    spread out, not all at the moment it named), else backoff."""
    if error.after is not None:
        after = max(error.after, BACKOFF_BASE)
        return after + rng.uniform(0, max(after, JITTER_FLOOR))
    return backoff(attempt, rng)


def says_not_now(error: Retry) -> bool:
    """A rate limit whose wait is worth waiting: its tries are bounded by max_wait alone. One that asks
    for less than BACKOFF_BASE counts against max_attempts like any failed try."""
    stated = max((w for w in (error.after, error.longest) if w is not None), default=None)
    return error.cause == "429" and (stated is None or stated >= BACKOFF_BASE)


def redirected(status: int, headers) -> Refused:
    """A redirect is never followed: the prompt and the key would go to a server the config does not
    name, and the result would be stored under the first URL's key."""
    location = (headers or {}).get("location") or "no location"
    return Refused(
        status,
        f"the server redirects to {location}; a redirect is not followed (the prompt would go to a server "
        f"endpoint.base_url does not name): set endpoint.base_url to the address you mean",
    )


class Concurrency:
    """How many requests may be in flight: at most `maximum`; cut by a tenth when rate limits are more
    than `CUT_SHARE` of the latest round's answers (a round: as many answers as the limit, at least
    `MIN_ROUND`), at most once per round (a 429 of a request sent before the last cut does not cut
    again); raised by one after as many successes as the limit (additive increase).

    Rate limits that are a share of the answers whatever the concurrency (a provider refusing one request
    in ten) cut nothing: fewer requests in flight would not refuse fewer, only wait longer. A limit of R
    requests a second refuses a growing share as the concurrency passes what R allows, and is cut back to
    just above it, where the server lets R through and the few refused retry when it says."""

    def __init__(self, maximum: int):
        self.maximum = maximum
        self.limit = float(maximum)
        self.active = 0
        self.lowest = float(maximum)
        self.cuts = 0
        self._last_cut = -1.0
        self._recent: deque = deque()  # the latest answers: True for a rate limit
        self._cond = asyncio.Condition()

    async def acquire(self) -> float:
        """Wait for a slot; returns when the request was let through (for `rate_limited`)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.active < max(1, int(self.limit)))
            self.active += 1
        return time.monotonic()

    async def release(self) -> None:
        async with self._cond:
            self.active -= 1
            # One slot freed: one waiter. Waking them all made each answer cost a pass over every request
            # still queued (2,000 items: 0.5 CPU-s of 2,000 answers). A raised limit wakes them all.
            self._cond.notify(1)

    def _seen(self, limited: bool) -> float:
        """Record an answer; the share of rate limits over the latest round."""
        self._recent.append(limited)
        while len(self._recent) > max(MIN_ROUND, int(self.limit)):
            self._recent.popleft()
        return sum(self._recent) / len(self._recent)

    def rate_limited(self, sent_at: float) -> None:
        share = self._seen(True)
        if sent_at < self._last_cut or len(self._recent) < min(MIN_ROUND, self.maximum) or share <= CUT_SHARE:
            return
        self.limit = max(1.0, self.limit * CUT)
        self.lowest = min(self.lowest, self.limit)
        self.cuts += 1
        self._last_cut = time.monotonic()
        self._recent.clear()

    async def succeeded(self) -> None:
        self._seen(False)
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            async with self._cond:
                self._cond.notify_all()
