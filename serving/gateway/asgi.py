"""The gateway as ASGI middleware in front of the placement API.

It answers ``POST /v1/completions``, ``/v1/chat/completions``, ``/v1/embeddings``,
``/classify`` and ``GET /v1/models`` itself, straight on ASGI (the framework's per-request
work would be most of the gateway's added latency), and passes everything else — the
placement API, ``/metrics``, health — to the app unchanged. It follows the app's lifespan:
the gateway's background work starts with the app and its connections close and its telemetry
is flushed when the app stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serving.gateway.proxy import Gateway
from sim.emulator.classify_api import CLASSIFY
from sim.emulator.embeddings_api import EMBEDDINGS
from sim.emulator.openai_api import CHAT, COMPLETIONS

GENERATE = frozenset((COMPLETIONS, CHAT))
POOLING = frozenset((EMBEDDINGS, CLASSIFY))
MODELS = "/v1/models"


class Companion(Protocol):
    """An app served beside the gateway under its own path prefixes (the Batch API), started
    and stopped with it."""

    prefixes: tuple[str, ...]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


class GatewayMiddleware:
    def __init__(
        self, app: ASGIApp, *, gateway: Gateway, companions: Sequence[Companion] = ()
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.companions = tuple(companions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path, method = scope["path"], scope["method"]
            if method == "POST" and path in GENERATE:
                await self.gateway.generate(scope, receive, send)
                return
            if method == "POST" and path in POOLING:
                await self.gateway.pooling(scope, receive, send)
                return
            if method == "GET" and path == MODELS:
                await self.gateway.models(scope, send)
                return
            for companion in self.companions:
                if path.startswith(companion.prefixes):
                    await companion(scope, receive, send)
                    return
        elif kind == "lifespan":
            await self.app(scope, self._lifespan(receive), send)
            return
        await self.app(scope, receive, send)

    def _lifespan(self, receive: Receive) -> Receive:
        gateway = self.gateway
        companions = self.companions

        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                gateway.start()
                for companion in companions:
                    companion.start()
            elif message["type"] == "lifespan.shutdown":
                for companion in companions:
                    await companion.close()
                await gateway.close()
            return message

        return wrapped
