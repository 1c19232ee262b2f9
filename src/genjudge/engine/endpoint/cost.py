"""What a job's requests cost, and the budget (`max_cost_usd`) that keeps it from passing it.

A job's spending is what its results cost: those it stored in earlier attempts (each stored result
records its usage and cost) and those it pays now. Two figures are kept for each request:

- its worst case: its prompt at most one token per byte of its messages (until responses show how many
  tokens a byte makes here, then that ratio with a margin), and `n` completions at its bound on output
  (the larger of `max_tokens` and `max_completion_tokens`, as sent) plus the most a response was billed
  above its bound so far (reasoning tokens some providers bill outside `max_tokens`, the probe's
  included);
- its estimate: the same prompt bound, and the completions the answers billed so far show (the largest,
  with a margin, never above the worst case), once a few have been billed.

A request is sent when its estimate fits in what the budget has left beside the estimates of the
requests in flight, and the worst cases of those in flight fit in it too: so the spending passes
`max_cost_usd` by at most about one request's bill (the last one sent, billed at its worst). Where a
request does not fit while others are in flight, it waits for them (near the end of the budget fewer
requests are in flight, rather than none); where it does not fit with none in flight, the budget has
stopped the job, and a rerun of the same budget sends nothing (`budget/<writer>.json` beside the store).

A try whose outcome is unknown (it timed out, its connection dropped after it was sent, its 200 was cut
off or had no usage, or the job stopped or died while it was in flight) may have been billed: its worst
case counts, as `possibly`, so that the budget bounds what the provider can bill and not only what came
back. A response billed above what was set aside for it is counted as billed and in
`over_reservation`; one billed above its bound on output, in `over_bound`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from genjudge.errors import InputError
from genjudge.models.endpoints import max_output_tokens

OVERHEAD_TOKENS = 8  # a message's role and separators, per message
MARGIN = 1.5  # on the tokens per byte and the completion tokens the responses showed
LEARN_AFTER = 3  # responses billed before their completions replace the bound in the estimate
SLACK = 1e-12  # dollars: float sums of equal costs


class BudgetReached(Exception):
    """The next request does not fit in max_cost_usd with nothing in flight: the job stops sending."""


class BudgetWait(BudgetReached):
    """The next request does not fit while others are in flight: it waits for one of them to settle."""


def n_choices(body: dict) -> int:
    try:
        return max(1, int(body.get("n") or 1))
    except (TypeError, ValueError):
        return 1


def message_bytes(body: dict) -> tuple[int, int]:
    """(the bytes of a request's messages as JSON, how many messages)."""
    msgs = body.get("messages") or []
    return len(json.dumps(msgs, ensure_ascii=False).encode()), len(msgs)


@dataclass
class Budget:
    price: object  # settings.Price
    limit: float | None  # None: no budget
    batch: bool = False
    spent: float = 0.0  # stored (earlier attempts) and paid now
    reserved: float = 0.0  # the worst cases of the requests in flight
    estimated: float = 0.0  # their estimates
    earlier: float = 0.0  # of `spent`, what earlier attempts stored
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    _bytes: int = 0
    _tokens: int = 0
    stopped: bool = False
    possibly: float = 0.0  # worst cases of tries whose outcome is unknown, this attempt's and earlier ones'
    possibly_earlier: float = 0.0  # of `possibly`, earlier attempts'
    responses: int = 0  # responses billed (with usage), the probe's included
    most_completion: int = 0  # the most completion tokens one choice was billed
    excess: int = 0  # the most completion tokens one choice was billed above its bound
    over_reservation: int = 0  # responses billed above what was set aside for them
    over_bound: int = 0  # responses billed above max_tokens x n
    usage_missing: int = 0  # responses kept without usage, counted at their worst case
    earlier_prompt_tokens: int = 0  # of the results earlier attempts of this job stored
    earlier_completion_tokens: int = 0
    _reservations: dict = field(default_factory=dict)  # token -> (estimate, worst case)

    # --- what a request may cost ------------------------------------------------------------------

    def _prompt_bound(self, body: dict) -> int:
        size, n_msgs = message_bytes(body)
        per_byte = min(1.0, MARGIN * self._tokens / self._bytes) if self._tokens and self._bytes else 1.0
        return math.ceil(size * per_byte) + OVERHEAD_TOKENS * n_msgs

    def _bound(self, body: dict) -> int:
        out = max_output_tokens(body)
        if out is None:  # the config check refuses this; a request built otherwise must not reserve nothing
            raise InputError(
                "max_cost_usd: a request without max_tokens or max_completion_tokens (endpoint.extra_body sets "
                "max_tokens: null) has no bound on its output, so its worst case cannot be set aside: set "
                "endpoint.extra_body.max_completion_tokens"
            )
        return out

    def worst_case(self, body: dict) -> float:
        if not self.price.known:
            return 0.0
        out = (self._bound(body) + self.excess) * n_choices(body)
        return self.price.cost(self._prompt_bound(body), out, self.batch)

    def estimate(self, body: dict) -> float:
        """What the request will likely cost, from what the responses so far were billed."""
        if not self.price.known:
            return 0.0
        bound = self._bound(body) + self.excess
        if self.responses >= LEARN_AFTER:
            bound = min(bound, math.ceil(MARGIN * self.most_completion) + 1)
        return self.price.cost(self._prompt_bound(body), bound * n_choices(body), self.batch)

    # --- the budget -------------------------------------------------------------------------------

    @property
    def committed(self) -> float:
        """What the job may have been billed so far, and what its requests in flight may add."""
        return self.spent + self.possibly + self.reserved

    @property
    def left(self) -> float:
        return (self.limit or 0.0) - self.spent - self.possibly

    def affords(self, *bodies: dict) -> bool:
        """Whether requests like `bodies` could be sent one after the other now, none in flight (False also
        marks the budget as reached)."""
        if self.limit is None or not self.price.known:
            return True
        if sum(self.estimate(b) for b in bodies) > self.left + SLACK:
            self.stopped = True
            return False
        return True

    def reserve(self, token, body: dict) -> float | None:
        """Set the request's worst case aside; BudgetWait where it must wait for those in flight,
        BudgetReached (and the budget marked stopped) where it cannot be sent. Returns the worst case
        (None where the price is unknown, or where no budget is kept and the request has no bound)."""
        if not self.price.known or (self.limit is None and max_output_tokens(body) is None):
            return None
        worst, est = self.worst_case(body), self.estimate(body)
        if self.limit is not None:
            fits = self.estimated + est <= self.left + SLACK and self.reserved <= self.left + SLACK
            if not fits and self._reservations:
                raise BudgetWait("waiting for the requests in flight")
            if not fits:
                self.stopped = True
                unknown = f", ${self.possibly:.4f} possibly billed by tries with no answer" if self.possibly else ""
                raise BudgetReached(
                    f"max_cost_usd {self.limit:g}: spent ${self.spent:.4f} (${self.earlier:.4f} of it by earlier "
                    f"attempts){unknown}, and the next request would likely cost ${est:.4f} (up to ${worst:.4f})"
                )
        self._reservations[token] = (est, worst)
        self.estimated += est
        self.reserved += worst
        return worst

    def hold(self, token, body: dict) -> None:
        """Set a request's worst case aside whatever the budget says: one already sent (a batch an
        earlier attempt submitted), whose cost comes whether or not it fits."""
        if self.limit is None or not self.price.known or token in self._reservations:
            return
        worst, est = self.worst_case(body), self.estimate(body)
        self._reservations[token] = (est, worst)
        self.estimated += est
        self.reserved += worst

    def _pop(self, token) -> tuple[float, float]:
        est, worst = self._reservations.pop(token, (0.0, 0.0))
        self.estimated -= est
        self.reserved -= worst
        if not self._reservations:  # no drift from float sums once nothing is in flight
            self.estimated = self.reserved = 0.0
        return est, worst

    def release(self, token) -> None:
        """A try that was not billed (refused, rate limited, a server error, never sent)."""
        self._pop(token)

    def unknown(self, token, body: dict | None = None) -> float:
        """A try whose outcome is unknown: its worst case counts from now on as possibly billed."""
        _, worst = self._pop(token)
        if not worst and body is not None and self.price.known and max_output_tokens(body) is not None:
            worst = self.worst_case(body)
        self.possibly += worst
        return worst

    def unbilled(self, token, body: dict) -> float:
        """A response kept without usage (some servers and gateways omit it): possibly billed at its worst."""
        self.usage_missing += 1
        return self.unknown(token, body)

    def paid(
        self,
        token,
        body: dict,
        prompt_tokens: int,
        completion_tokens: int,
        batch=None,
        cached_tokens=0,
        reasoning_tokens=0,
    ):
        """Record a response's usage; its cost (None where the price is unknown). `batch`: whether it
        came in a batch file (by default the budget's own way of sending; a probe never does)."""
        est, _ = self._pop(token)
        size, _ = message_bytes(body)
        self._bytes += size
        self._tokens += prompt_tokens
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cached_tokens += cached_tokens or 0
        self.reasoning_tokens += reasoning_tokens or 0
        n = n_choices(body)
        per_choice = math.ceil(completion_tokens / n)
        self.responses += 1
        self.most_completion = max(self.most_completion, per_choice)
        bound = max_output_tokens(body)
        if bound is not None and per_choice > bound:
            self.over_bound += 1
            self.excess = max(self.excess, per_choice - bound)
        cost = self.price.cost(prompt_tokens, completion_tokens, self.batch if batch is None else batch, cached_tokens)
        if cost is not None:
            self.spent += cost
            if token is not None and est and cost > est + SLACK:
                self.over_reservation += 1
        return cost

    def stored(self, cost: float | None, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """A result an earlier attempt of this job paid for (and its tokens, for the run's totals)."""
        if cost:
            self.spent += cost
            self.earlier += cost
        self.earlier_prompt_tokens += int(prompt_tokens or 0)
        self.earlier_completion_tokens += int(completion_tokens or 0)

    def stored_unknown(self, cost: float | None) -> None:
        """A try of an earlier attempt whose outcome is unknown (tries.unsettled), or a result it kept
        without usage."""
        if cost:
            self.possibly += cost
            self.possibly_earlier += cost
