"""A loopback chat completions API that behaves as real providers and proxies sometimes do, for what a
real local server cannot do: echo the request's headers in a 502, omit or null `usage`, bill reasoning
tokens above `max_tokens`, withhold an answer (`content_filter`, a reply of only tool calls), send a
reasoning trace apart (`reasoning_content`), write a verdict with markdown around its label, redirect
to another origin, ask for a wait of a millisecond, or serve prompt tokens from its cache.

`answer(body, headers)` decides each reply: it returns a `Reply` (or None for the plain answer "ok").
Every request is counted per prompt (its last message's text), with the headers it carried.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    content: str | None = "ok"
    usage: dict | None | str = "default"  # "default": 5 prompt and 1 completion token per choice; None: no usage
    finish: str = "stop"
    headers: dict = field(default_factory=dict)
    message: dict = field(default_factory=dict)  # more fields of the message (tool_calls, reasoning_content)
    logprobs: list | None = None  # [(token, [(top token, logprob), ...]), ...]
    body: dict | None = None  # a whole body instead (an error's)


def usage(prompt: int = 5, completion: int = 1, cached: int = 0, reasoning: int = 0) -> dict:
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


class Provider:
    def __init__(self, answer=None):
        self.answer = answer or (lambda body, headers: None)
        self.requests: dict = {}  # prompt -> requests
        self.headers: list = []  # each request's headers
        self.bodies: list = []
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self._send(200, {"object": "list", "data": []}, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                prompt = prompt_of(body)
                with provider.lock:
                    provider.requests[prompt] = provider.requests.get(prompt, 0) + 1
                    provider.headers.append(headers)
                    provider.bodies.append(body)
                reply = provider.answer(body, headers) or Reply()
                self._send(
                    reply.status, reply.body if reply.body is not None else completion(body, reply), reply.headers
                )

            def _send(self, status, payload, headers):
                data = json.dumps(payload).encode()
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
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def total(self) -> int:
        return sum(self.requests.values())

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def completion(body: dict, reply: Reply) -> dict:
    n = int(body.get("n") or 1)
    message = {"role": "assistant", "content": reply.content, **reply.message}
    choice = {"index": 0, "message": message, "finish_reason": reply.finish}
    if reply.logprobs is not None:
        choice["logprobs"] = {
            "content": [
                {"token": t, "logprob": -0.01, "top_logprobs": [{"token": a, "logprob": lp} for a, lp in top]}
                for t, top in reply.logprobs
            ]
        }
    out = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{**choice, "index": i} for i in range(n)],
    }
    if reply.usage == "default":
        out["usage"] = usage(5, n)
    elif reply.usage is not None:
        out["usage"] = reply.usage
    return out


def echoing_502(body: dict, headers: dict) -> Reply:
    """A proxy's 502 that repeats the request it could not forward, headers and query included."""
    return Reply(
        status=502,
        body={"error": {"message": f"upstream failed for request with headers {json.dumps(headers)}", "code": 502}},
    )
