"""Small OpenAI-shaped HTTP upstreams for the end-to-end tests: uvicorn on free 127.0.0.1
ports, each answering completions and chat completions (streaming or not, with ``usage``; after
``x-test-delay-s`` seconds when the request says so), ``/v1/models`` and ``/health``, and
recording the requests it served."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

OUTPUT_TOKENS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Upstream:
    name: str
    port: int
    hits: list[dict[str, Any]] = field(default_factory=list)
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def app(self) -> Starlette:
        async def complete(request: Request) -> Response:
            raw = await request.body()
            delay = float(request.headers.get("x-test-delay-s", "0"))  # hold the answer
            if delay > 0:
                await asyncio.sleep(delay)
            body = json.loads(raw)
            self.hits.append(
                {"path": request.url.path, "headers": dict(request.headers), "body": body}
            )
            headers = {"x-served-by": self.name}
            usage = {"prompt_tokens": 5, "completion_tokens": OUTPUT_TOKENS, "total_tokens": 8}
            if body.get("stream"):

                async def events() -> Any:
                    for i in range(OUTPUT_TOKENS):
                        chunk = {"choices": [{"index": 0, "text": f"t{i}"}], "model": body["model"]}
                        yield f"data: {json.dumps(chunk)}\n\n"
                    yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
                    yield "data: [DONE]\n\n"

                return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
            answer = {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "text": f"served by {self.name}", "finish_reason": "length"}
                ],
                "usage": usage,
            }
            return JSONResponse(answer, headers=headers)

        async def models(request: Request) -> Response:
            self.hits.append({"path": request.url.path, "headers": dict(request.headers)})
            return JSONResponse(
                {"object": "list", "data": [{"id": "llama-3-8b"}]},
                headers={"x-served-by": self.name},
            )

        return Starlette(
            routes=[
                Route("/v1/completions", complete, methods=["POST"]),
                Route("/v1/chat/completions", complete, methods=["POST"]),
                Route("/v1/models", models),
            ]
        )

    def start(self) -> Upstream:
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.server.started, f"upstream {self.name} did not start"
        return self

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.should_exit = True
            self.thread.join(timeout=10)


def start_upstreams(n: int) -> list[Upstream]:
    return [Upstream(f"r{i}", free_port()).start() for i in range(n)]
