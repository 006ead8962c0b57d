"""The gateway's completions answered inside the HTTP protocol, ahead of ASGI.

Under uvicorn every request becomes an ASGI scope, a task running the framework's layers, an
event per body message and a write per ``send``: for a request the gateway only passes on,
that is a large share of its CPU. This protocol (uvicorn's httptools protocol, with
``POST /v1/route`` already answered in it: :mod:`serving.api.route_protocol`) takes
``POST /v1/completions`` and ``/v1/chat/completions`` itself: the parser's headers and body go
straight to :meth:`Gateway.generate_read` in a task of its own, and its answer is written to
the socket with one write for a whole answer (head and body) and one per event of a stream
(chunked). Everything else — another path, a pipelined request behind one still unanswered,
an upgrade — goes through uvicorn's own path to the app, where
:class:`~serving.gateway.asgi.GatewayMiddleware` answers the same paths the same way.

While a gateway answer is in flight on a connection, bytes of the client's next request wait
(HTTP/1.1 pipelining, which clients rarely use) and are parsed once the answer is complete; a
client that closes the connection is seen at once (the stream stops, a queued request leaves
the queue).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import Message
from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from serving.api.route_protocol import RouteProtocol
from serving.api.runtime import ServiceRuntime
from serving.gateway.proxy import Gateway
from sim.emulator.openai_api import CHAT, COMPLETIONS

_GENERATE_URLS = frozenset((COMPLETIONS.encode(), CHAT.encode()))
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_CLOSE = b"connection: close\r\n"
_CHUNKED = b"transfer-encoding: chunked\r\n"
_LAST_CHUNK = b"0\r\n\r\n"
_INTERNAL = (
    b'{"error": {"message": "internal error in the gateway", "type": "server_error", '
    b'"param": null, "code": 500}}'
)
logger = logging.getLogger("placement.gateway")


class _Exchange:
    """One gateway request on a connection: its body for ``receive``, the answer's bytes from
    ``send`` to the transport. It stands as the connection's current cycle while its answer is
    in flight, so uvicorn queues a pipelined request behind it and tells it of a disconnect."""

    __slots__ = (
        "_read",
        "_waiters",
        "body",
        "chunked",
        "disconnected",
        "headers",
        "keep_alive",
        "protocol",
        "response_complete",
        "status",
    )

    def __init__(self, protocol: GatewayProtocol, body: bytes, keep_alive: bool) -> None:
        self.protocol = protocol
        self.body = body
        self.keep_alive = keep_alive
        self._waiters: list[asyncio.Future[None]] = []  # receive() calls awaiting a disconnect
        self._read = False
        self.status = 0  # set when the answer starts
        self.headers: list[tuple[bytes, bytes]] | None = None  # a head not yet written
        self.chunked: bool | None = None  # None until the head is written
        self.response_complete = False
        self.disconnected = False

    @property
    def message_event(self) -> _Exchange:
        return self  # uvicorn sets it when the connection is lost

    def set(self) -> None:
        self.disconnected = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def receive(self) -> Message:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if not self.disconnected:
            # a future of its own: cancelling one caller's wait cancels nothing shared
            waiter = self.protocol.loop.create_future()
            self._waiters.append(waiter)
            await waiter
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.response_complete or self.disconnected:
            return
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = list(message.get("headers", ()))
            return
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        out: list[bytes] = self._head(more) if self.headers is not None else []
        if self.chunked:
            if body:
                out += (b"%x\r\n" % len(body), body, b"\r\n")
            if not more:
                out.append(_LAST_CHUNK)
        elif body:
            out.append(body)
        protocol = self.protocol
        if out:
            protocol.transport.write(b"".join(out))
        if not more:
            protocol.answered(self)
        elif protocol.flow.write_paused:
            await protocol.flow.drain()

    def _head(self, more: bool) -> list[bytes]:
        headers, self.headers = self.headers or [], None
        out = [STATUS_LINE[self.status]]
        sized = False
        for name, value in (*self.protocol.server_state.default_headers, *headers):
            if name == b"content-length":
                sized = True
            out += (name, b": ", value, b"\r\n")
        self.chunked = more and not sized
        if self.chunked:
            out.append(_CHUNKED)
        elif not sized:
            out.append(b"content-length: 0\r\n")
        if not self.keep_alive:
            out.append(_CLOSE)
        out.append(b"\r\n")
        return out


class GatewayProtocol(RouteProtocol):
    """Set :attr:`gateway` (and :attr:`runtime`) on a subclass (:func:`gateway_protocol`)."""

    gateway: Gateway
    _gw = False  # the request being parsed is the gateway's
    _gw_keep_alive = True
    _gw_size = 0
    _gw_chunks: list[bytes]

    def on_headers_complete(self) -> None:
        parser = self.parser
        previous = self.cycle
        if (
            self.url not in _GENERATE_URLS
            or parser.get_method() != b"POST"
            or parser.should_upgrade()
            or (previous is not None and not previous.response_complete)
        ):
            self._gw = False
            super().on_headers_complete()
            return
        self._gw = True
        self._gw_keep_alive = parser.get_http_version() != "1.0" and parser.should_keep_alive()
        self._gw_size = 0
        self._gw_chunks = []
        if self.expect_100_continue:
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        if not self._gw:
            super().on_body(body)
            return
        self._gw_size += len(body)
        if self._gw_size <= self.runtime.settings.max_body_bytes:
            self._gw_chunks.append(body)

    def on_message_complete(self) -> None:
        if not self._gw:
            super().on_message_complete()
            return
        self._between_messages = True
        self._gw = False
        within = self._gw_size <= self.runtime.settings.max_body_bytes
        chunks, self._gw_chunks = self._gw_chunks, []
        body = (chunks[0] if len(chunks) == 1 else b"".join(chunks)) if within else None
        exchange = _Exchange(self, body or b"", self._gw_keep_alive)
        self.cycle = exchange  # type: ignore[assignment]
        path = self.url.decode("ascii")
        task = self.loop.create_task(self._run(exchange, path, self.headers, body))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(
        self,
        exchange: _Exchange,
        path: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes | None,
    ) -> None:
        try:
            await self.gateway.generate_read(path, headers, body, exchange.receive, exchange.send)
        except Exception:
            logger.exception("gateway request failed")
            if exchange.chunked is None and exchange.headers is None:  # nothing sent yet
                exchange.status = 500
                exchange.headers = [(b"content-type", b"application/json")]
                await exchange.send({"type": "http.response.body", "body": _INTERNAL})
        finally:
            if not exchange.response_complete:  # its answer was cut short: so is the connection
                exchange.keep_alive = False
                self.answered(exchange)

    def answered(self, exchange: _Exchange) -> None:
        """The answer is complete: the connection goes on to the next request or is closed."""
        if exchange.response_complete:
            return
        exchange.response_complete = True
        if not exchange.keep_alive:
            self.server_state.total_requests += 1
            self.transport.close()
            return
        self.on_response_complete()  # uvicorn's: a pipelined request next, or keep-alive


def gateway_protocol(runtime: ServiceRuntime, gateway: Gateway) -> type[GatewayProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for this gateway."""
    attrs: dict[str, Any] = {"runtime": runtime, "gateway": gateway}
    return type("RuntimeGatewayProtocol", (GatewayProtocol,), attrs)
