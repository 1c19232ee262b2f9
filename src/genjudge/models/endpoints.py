"""Models behind an endpoint (`engine: openai`): what names one, known without asking it.

An endpoint model has no files here: its public base URL and its name stand for it in item keys and
rerun params, as a fingerprint stands for a local model's files.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from urllib.parse import urlsplit, urlunsplit

from genjudge.errors import InputError

# A snapshot's name: a date (gpt-4.1-2025-04-14, claude-3-5-sonnet-20241022, gpt-4-0613) or a
# numbered release at the end (gemini-1.5-pro-002).
SNAPSHOT = re.compile(r"(\d{4}-\d{2}-\d{2}|\d{8}|-\d{4}$|-\d{3}$)")


def public_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str | None, where: str, allow_http: bool) -> None:
    """An endpoint's base URL: http(s) with a host; https unless the host is loopback or allow_http."""
    if not url:
        raise InputError(
            f"{where}.base_url: not set; engine: openai needs the API's base URL (e.g. https://api.openai.com/v1)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{where}.base_url: {public_url(url)!r} is not an http(s) URL with a host")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise InputError(
            f"{where}.base_url: {public_url(url)!r} carries a query string or fragment, which the client would "
            f"send wrongly and the results would record; put what a gateway needs in {where}.extra_headers "
            f"(a value may be {{env: NAME}}) or {where}.extra_body"
        )
    if parts.username or parts.password:
        raise InputError(
            f"{where}.base_url: holds credentials; put the key in an environment variable and name it in "
            f"{where}.api_key_env (the config is recorded with the results; the key must not be)"
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname) and not allow_http:
        raise InputError(
            f"{where}.base_url: {public_url(url)!r} is plain http to a host that is not loopback: the key and the "
            f"data would travel unencrypted; use https, or set {where}.allow_http: true on a trusted network"
        )


def moving_alias(model: str) -> bool:
    """A hosted model's name without a date or release number (`gpt-4o`, `*-latest`), which its
    provider may point at another model. A served checkpoint's id (`org/name`, a path) names its files."""
    if "latest" in model.lower():
        return True
    return "/" not in model and SNAPSHOT.search(model) is None


def identity(url: str, model: str) -> str:
    """What stands for an endpoint model in item keys and rerun params, as a fingerprint does for a
    local one: the public base URL and the model's name."""
    return "openai:" + hashlib.sha256(json.dumps([public_url(url), model]).encode()).hexdigest()[:16]


OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens")


def max_output_tokens(request: dict) -> int | None:
    """The most completion tokens a request may be billed for: its `max_tokens`, or `max_completion_tokens`
    where extra_body leaves max_tokens out (reasoning models); the larger where it holds both (servers
    differ in which one wins). None: nothing in the request bounds its output."""
    bounds = [int(request[k]) for k in OUTPUT_FIELDS if request.get(k) is not None]
    return max(bounds) if bounds else None


def output_bound(max_tokens: int, extra_body: dict) -> int | None:
    """max_output_tokens of the requests a config sends: `max_tokens` (max_new_tokens, or 1 for a
    prefilled logprob verdict) with extra_body's fields over it, as engine.endpoint.requests.body sends them."""
    return max_output_tokens({"max_tokens": max_tokens, **extra_body})
