"""What the config says of an endpoint model, as typed data built once from its spec.

The API key is read from the environment variable the config names, when the job starts, and from
nowhere else; it is never part of these settings' plain data, of an item's key or of an error message
(`redact`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from genjudge.errors import InputError
from genjudge.models.endpoints import public_url


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens; None where unknown (no cost, no budget)."""

    input_per_mtok: float | None
    output_per_mtok: float | None
    batch_discount: float

    @property
    def known(self) -> bool:
        return self.input_per_mtok is not None and self.output_per_mtok is not None

    def cost(self, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float | None:
        if not self.known:
            return None
        usd = (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6
        return usd * (self.batch_discount if batch else 1.0)


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key_env: str | None
    max_connections: int
    timeout: float
    max_attempts: int
    max_wait: float
    allow_http: bool
    prefill: bool
    extra_body: dict
    batch: bool
    batch_poll_seconds: float
    latency_seconds: float
    price: Price
    max_cost_usd: float | None

    @classmethod
    def of(cls, spec) -> Endpoint:
        e, p = spec.endpoint, spec.price
        return cls(
            base_url=str(e["base_url"]),
            api_key_env=e["api_key_env"],
            max_connections=int(e["max_connections"]),
            timeout=float(e["timeout"]),
            max_attempts=int(e["max_attempts"]),
            max_wait=float(e["max_wait"]),
            allow_http=bool(e["allow_http"]),
            prefill=bool(e["prefill"]),
            extra_body=dict(e["extra_body"]),
            batch=bool(e["batch"]),
            batch_poll_seconds=float(e["batch_poll_seconds"]),
            latency_seconds=float(e["latency_seconds"]),
            price=Price(p["input_per_mtok"], p["output_per_mtok"], float(p["batch_discount"])),
            max_cost_usd=spec.max_cost_usd,
        )

    @property
    def url(self) -> str:
        """The base URL without credentials, query or fragment: what is recorded and keyed."""
        return public_url(self.base_url)

    def api_key(self) -> str:
        """The key from the environment (the job's, never the config's); a placeholder for a server
        that takes none."""
        if self.api_key_env is None:
            return "EMPTY"
        key = os.environ.get(self.api_key_env)
        if not key:
            raise InputError(
                f"endpoint.api_key_env: the environment variable {self.api_key_env} is not set (or empty) in "
                f"this job's environment; export it before running (the key is read from there only)"
            )
        return key


def redact(text: str, secrets: list[str]) -> str:
    """`text` with each secret and any bearer token replaced: error messages and logs."""
    for s in secrets:
        if s and s != "EMPTY":
            text = text.replace(s, "[redacted]")
    return re.sub(r"(?i)(authorization:\s*bearer\s+|bearer\s+)\S+", r"\1[redacted]", text)
