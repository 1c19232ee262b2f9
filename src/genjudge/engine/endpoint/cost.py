"""What a job's requests cost, and the budget (`max_cost_usd`) that stops it before it would pass it.

A job's spending is what its results cost: those it stored in earlier attempts (each stored result
records its usage and cost) and those it pays now. Before a request is sent, its worst case is
reserved: its prompt at most one token per byte of its messages (until responses show how many
tokens a byte makes here, then that ratio with a margin) and its bound on output (`max_tokens`, or
`max_completion_tokens` where extra_body leaves max_tokens out). A request with neither is refused
while a budget is kept: an endpoint's context length is not known here, and reserving nothing would
let it pass the budget many times over (the config check refuses such a budget before any job). A
request whose worst case would pass the budget is not sent; the job then ends with the budget named
as the reason, its stored results kept, and a rerun with a larger budget continues where it stopped.

A try whose outcome is unknown (it timed out, its connection dropped after it was sent, its 200 was cut
off, or the job stopped or died while it was in flight) may have been billed: its worst case stays
counted, as `possibly`, so that the budget bounds what the provider can bill and not only what came back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from genjudge.errors import InputError
from genjudge.models.endpoints import max_output_tokens

OVERHEAD_TOKENS = 8  # a message's role and separators, per message
MARGIN = 1.5  # on the tokens per byte the responses showed


class BudgetReached(Exception):
    """The next request's worst case would pass max_cost_usd."""


@dataclass
class Budget:
    price: object  # settings.Price
    limit: float | None  # None: no budget
    batch: bool = False
    spent: float = 0.0  # stored (earlier attempts) and paid now
    reserved: float = 0.0
    earlier: float = 0.0  # of `spent`, what earlier attempts stored
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _bytes: int = 0
    _tokens: int = 0
    stopped: bool = False
    possibly: float = 0.0  # worst cases of tries whose outcome is unknown, this attempt's and earlier ones'
    possibly_earlier: float = 0.0  # of `possibly`, earlier attempts'
    _reservations: dict = field(default_factory=dict)

    def worst_case(self, body: dict) -> float:
        if not self.price.known:
            return 0.0
        msgs = body.get("messages") or []
        size = len(json.dumps(msgs, ensure_ascii=False).encode())
        per_byte = min(1.0, MARGIN * self._tokens / self._bytes) if self._tokens and self._bytes else 1.0
        prompt = int(size * per_byte) + OVERHEAD_TOKENS * len(msgs)
        out = max_output_tokens(body)
        if out is None:  # the config check refuses this; a request built otherwise must not reserve nothing
            raise InputError(
                "max_cost_usd: a request without max_tokens or max_completion_tokens (endpoint.extra_body sets "
                "max_tokens: null) has no bound on its output, so its worst case cannot be set aside: set "
                "endpoint.extra_body.max_completion_tokens"
            )
        return self.price.cost(prompt, out, self.batch)

    def affords(self, *bodies: dict) -> bool:
        """Whether requests like `bodies` could be sent now (False also marks the budget as reached)."""
        if self.limit is None or not self.price.known:
            return True
        if self.committed + sum(self.worst_case(b) for b in bodies) > self.limit:
            self.stopped = True
            return False
        return True

    @property
    def committed(self) -> float:
        """What the job may have been billed so far, and what its requests in flight may add."""
        return self.spent + self.possibly + self.reserved

    def reserve(self, token, body: dict) -> float | None:
        """Set the request's worst case aside, or raise BudgetReached (and remember that the budget
        stopped). Returns the worst case (None where the price is unknown, or where no budget is kept
        and the request has no bound on its output)."""
        if not self.price.known or (self.limit is None and max_output_tokens(body) is None):
            return None
        cost = self.worst_case(body)
        if self.limit is not None and self.committed + cost > self.limit:
            self.stopped = True
            unknown = f", ${self.possibly:.4f} possibly billed by tries with no answer" if self.possibly else ""
            raise BudgetReached(
                f"max_cost_usd {self.limit:g}: spent ${self.spent:.4f} (${self.earlier:.4f} of it by earlier attempts)"
                f"{unknown}, ${self.reserved:.4f} in flight, and the next request may cost up to ${cost:.4f}"
            )
        self._reservations[token] = cost
        self.reserved += cost
        return cost

    def hold(self, token, body: dict) -> None:
        """Set a request's worst case aside whatever the budget says: one already sent (a batch an
        earlier attempt submitted), whose cost comes whether or not it fits."""
        if self.limit is None or not self.price.known or token in self._reservations:
            return
        cost = self.worst_case(body)
        self._reservations[token] = cost
        self.reserved += cost

    def release(self, token) -> None:
        """A try that was not billed (refused, rate limited, a server error, never sent)."""
        self.reserved -= self._reservations.pop(token, 0.0)

    def unknown(self, token) -> float:
        """A try whose outcome is unknown: its worst case counts from now on as possibly billed."""
        cost = self._reservations.pop(token, 0.0)
        self.reserved -= cost
        self.possibly += cost
        return cost

    def paid(self, token, body: dict, prompt_tokens: int, completion_tokens: int, batch=None) -> float | None:
        """Record a response's usage; its cost (None where the price is unknown). `batch`: whether it
        came in a batch file (by default the budget's own way of sending; a probe never does)."""
        self.release(token)
        msgs = body.get("messages") or []
        self._bytes += len(json.dumps(msgs, ensure_ascii=False).encode())
        self._tokens += prompt_tokens
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        cost = self.price.cost(prompt_tokens, completion_tokens, self.batch if batch is None else batch)
        if cost is not None:
            self.spent += cost
        return cost

    def stored(self, cost: float | None) -> None:
        """A result an earlier attempt of this job paid for."""
        if cost:
            self.spent += cost
            self.earlier += cost

    def stored_unknown(self, cost: float) -> None:
        """A try of an earlier attempt whose outcome is unknown (tries.unsettled)."""
        self.possibly += cost
        self.possibly_earlier += cost
