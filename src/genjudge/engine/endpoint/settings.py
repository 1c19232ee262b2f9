"""What the config says of an endpoint model, as typed data built once from its spec; and the one
redaction every message leaving the endpoint engine goes through.

The API key is read from the environment variable the config names, when the job starts, and from
nowhere else; it is never part of these settings' plain data or of an item's key. Every secret the
job holds (the key, the values of `extra_headers`) is registered with `SECRETS` the moment it is read;
the endpoint logger's filter and `scrubbed` (the engine seam's exit: its exceptions and its results)
apply `SECRETS.redact` to everything that leaves, so that a path added later cannot skip it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from dataclasses import dataclass
from urllib.parse import quote

from genjudge.errors import InputError
from genjudge.models.endpoints import public_url

FILTERED_ACTIONS = ("fail", "count_wrong")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens; None where unknown (no cost, no budget). `cached_input_per_mtok`:
    prompt tokens the provider served from its cache (`usage.prompt_tokens_details.cached_tokens`), None:
    billed at `input_per_mtok`. `batch_discount`: the share of the price a batch file's line costs,
    applied to all three prices (the price keys are the provider's list prices, not its batch ones)."""

    input_per_mtok: float | None
    output_per_mtok: float | None
    batch_discount: float
    cached_input_per_mtok: float | None = None

    @property
    def known(self) -> bool:
        return self.input_per_mtok is not None and self.output_per_mtok is not None

    def cost(self, prompt_tokens: int, completion_tokens: int, batch: bool = False, cached_tokens: int = 0):
        """USD of a response's usage (None where the price is unknown). `completion_tokens` include the
        reasoning tokens (providers bill them as output); `cached_tokens` are part of `prompt_tokens`."""
        if not self.known:
            return None
        cached = min(int(cached_tokens or 0), prompt_tokens) if self.cached_input_per_mtok is not None else 0
        usd = (
            (prompt_tokens - cached) * self.input_per_mtok
            + cached * (self.cached_input_per_mtok or 0.0)
            + completion_tokens * self.output_per_mtok
        ) / 1e6
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
    extra_headers: tuple = ()  # ((name, value or {"env": NAME}), ...): values are secrets
    on_filtered: str = "fail"

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
            price=Price(
                p["input_per_mtok"],
                p["output_per_mtok"],
                float(p["batch_discount"]),
                p.get("cached_input_per_mtok"),
            ),
            max_cost_usd=spec.max_cost_usd,
            extra_headers=tuple(sorted((e.get("extra_headers") or {}).items(), key=lambda kv: kv[0])),
            on_filtered=e.get("on_filtered", "fail"),
        )

    @property
    def url(self) -> str:
        """The base URL without credentials, query or fragment: what is recorded and keyed."""
        return public_url(self.base_url)

    def api_key(self, where: str = "") -> str:
        """The key from the environment (the job's, never the config's); a placeholder for a server
        that takes none. Registered as a secret the moment it is read. `where`: the model's config key."""
        if self.api_key_env is None:
            return "EMPTY"
        key = os.environ.get(self.api_key_env)
        if not key:
            raise InputError(
                f"{where + '.' if where else ''}endpoint.api_key_env: the environment variable {self.api_key_env} is not set (or empty) in "
                f"this job's environment; export it before running (the key is read from there only)"
            )
        SECRETS.add(key)
        return key

    def headers(self) -> dict:
        """`extra_headers` as sent: a value `{env: NAME}` read from the job's environment. Every value is
        registered as a secret (a gateway's token travels in one)."""
        out = {}
        for name, value in self.extra_headers:
            if isinstance(value, dict):
                value = os.environ.get(value["env"])
                if not value:
                    raise InputError(
                        f"endpoint.extra_headers.{name}: the environment variable {dict(self.extra_headers)[name]['env']} "
                        f"is not set (or empty) in this job's environment"
                    )
            out[name] = str(value)
            SECRETS.add(out[name])
        return out


# --- redaction ---------------------------------------------------------------------------------------

# Header values a server or proxy may echo ("authorization": "Bearer ...", api-key: ...), as text or JSON.
HEADER = re.compile(
    r"(?i)((?:proxy-)?authorization|x-api-key|api-key|x-goog-api-key|cookie|set-cookie|x-auth-token)"
    r"(\"?'?\s*[:=]\s*\"?'?)((?:bearer|basic|token)\s+)?(?!\[redacted\])(?!(?i:bearer|basic|token)\s)[^\s\"',;}\]]+"
)
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]{8,}")
# Query values that carry credentials (`?key=...`, as some gateways take the key).
QUERY = re.compile(
    r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|sig|signature|secret|password|code)=)"
    r"(?!\[redacted\])[^&#\s\"'<>]+"
)
REDACTED = "[redacted]"


class Secrets:
    """The secrets this process holds, and the one function that removes them from a text."""

    def __init__(self):
        self._values: set[str] = set()

    def add(self, value: str | None) -> None:
        if value and value != "EMPTY" and len(value) >= 4:
            self._values.add(value)
            self._values.add(quote(value, safe=""))  # as a URL would carry it

    def redact(self, text: str) -> str:
        """`text` without any registered secret, header value, bearer token or credential in a query."""
        for s in sorted(self._values, key=len, reverse=True):
            if s in text:
                text = text.replace(s, REDACTED)
        text = HEADER.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + REDACTED, text)
        text = BEARER.sub(lambda m: m.group(1) + " " + REDACTED, text)
        return QUERY.sub(lambda m: m.group(1) + REDACTED, text)

    def exact(self, text: str) -> str:
        """Only the registered secrets removed: for a model's own answer, whose text is the result."""
        for s in self._values:
            if s in text:
                text = text.replace(s, REDACTED)
        return text

    def scrub(self, value, exact: bool = False):
        """Every string in a (nested) dict, list or tuple redacted; other values as they are."""
        clean = self.exact if exact else self.redact
        if isinstance(value, str):
            return clean(value)
        if isinstance(value, dict):
            return {k: self.scrub(v, exact) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub(v, exact) for v in value)
        return value

    def scrub_exception(self, exc: BaseException) -> None:
        """The exception's message redacted in place, and the chain below it (the client's errors, which
        hold the server's whole answer) cut off."""
        exc.args = tuple(self.redact(a) if isinstance(a, str) else a for a in exc.args)
        exc.__cause__ = None
        exc.__context__ = None
        exc.__suppress_context__ = True


SECRETS = Secrets()


def redact(text: str, secrets: list[str] | None = None) -> str:
    """`text` with each secret and any credential-looking header, bearer token or query value removed."""
    for s in secrets or ():
        SECRETS.add(s)
    return SECRETS.redact(text)


class RedactingFilter(logging.Filter):
    """Every record of the endpoint logger, formatted and redacted before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = SECRETS.redact(record.getMessage())
        record.args = ()
        if record.exc_info and record.exc_info[1] is not None:
            SECRETS.scrub_exception(record.exc_info[1])
            record.exc_text = None
        return True


def scrubbed(fn):
    """The engine seam's exit: what `fn` returns and raises, redacted (one place for every path)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            SECRETS.scrub_exception(exc)
            raise
        if dataclasses.is_dataclass(out):  # a Completion: its messages whole, its answers' text exactly
            for name in ("incomplete", "too_long", "info"):
                if hasattr(out, name):
                    setattr(out, name, SECRETS.scrub(getattr(out, name)))
            if hasattr(out, "results"):
                out.results = SECRETS.scrub(out.results, exact=True)
            return out
        return SECRETS.scrub(out)

    return wrapper


logging.getLogger("endpoint").addFilter(RedactingFilter())
