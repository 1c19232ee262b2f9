"""A chat completions server that answers every request at once, for measuring a client's own cost:
`python bench/_instant_server.py PORT` serves POST /v1/chat/completions (and GET /v1/models) on loopback
with the reply "VERDICT: CORRECT" and its usage, in a process of its own (aiohttp, one event loop)."""

from __future__ import annotations

import json
import sys

from aiohttp import web


def reply(model: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "VERDICT: CORRECT"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 4, "total_tokens": 54},
        }
    ).encode()


async def chat(request: web.Request) -> web.Response:
    body = await request.json()
    return web.Response(body=reply(body.get("model", "m")), content_type="application/json")


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})


def main() -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=lambda *a: None)


if __name__ == "__main__":
    main()
