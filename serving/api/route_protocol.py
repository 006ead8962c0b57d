"""uvicorn's HTTP protocol (httptools) with ``POST /v1/route`` answered inside it.

Under uvicorn every request becomes an ASGI scope, a task, an event and two ``send`` messages
before and after the application runs: for a decision of tens of microseconds that is most of
the cost. A decision is synchronous, so this protocol answers ``POST /v1/route`` where the
parser completes the message: :func:`serving.api.fast_route.answer` gives the bytes, one
``transport.write`` sends them, and the connection's keep-alive timer is armed as uvicorn
does. Every other request, a pipelined one behind an unanswered request and an upgrade go
through uvicorn's own path to the application untouched (where
:class:`~serving.api.fast_route.FastRoute` answers ``/v1/route`` the same way).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from serving.api.fast_route import ROUTE_PATH, answer
from serving.api.runtime import ServiceRuntime

_ROUTE_URL = ROUTE_PATH.encode()
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_CLOSE = b"connection: close\r\n"


class RouteProtocol(HttpToolsProtocol):
    """Set :attr:`runtime` on a subclass (:func:`route_protocol`) before serving."""

    runtime: ServiceRuntime
    _fast = False
    _keep_alive = True
    _size = 0
    _chunks: list[bytes]

    def on_headers_complete(self) -> None:
        parser = self.parser
        previous = self.cycle
        if (
            self.url != _ROUTE_URL
            or parser.get_method() != b"POST"
            or parser.should_upgrade()
            or (previous is not None and not previous.response_complete)
        ):
            self._fast = False
            super().on_headers_complete()
            return
        self._fast = True
        self._keep_alive = parser.get_http_version() != "1.0" and parser.should_keep_alive()
        self._size = 0
        self._chunks = []
        if self.expect_100_continue:
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        if not self._fast:
            super().on_body(body)
            return
        self._size += len(body)
        if self._size <= self.runtime.settings.max_body_bytes:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        if not self._fast:
            super().on_message_complete()
            return
        self._fast = False
        within = self._size <= self.runtime.settings.max_body_bytes
        body = b"".join(self._chunks) if within else None
        self._chunks = []
        status, payload, headers = answer(self.runtime, self.headers, body)
        out = [STATUS_LINE[status]]
        for name, value in (*self.server_state.default_headers, *headers):
            out += (name, b": ", value, b"\r\n")
        if not self._keep_alive:
            out.append(_CLOSE)
        out += (b"\r\n", payload)
        self.transport.write(b"".join(out))
        self.server_state.total_requests += 1
        if not self._keep_alive:
            self.transport.close()
        elif not self.transport.is_closing():
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )


def route_protocol(runtime: ServiceRuntime) -> type[RouteProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for this runtime."""
    attrs: dict[str, Any] = {"runtime": runtime}
    return type("RuntimeRouteProtocol", (RouteProtocol,), attrs)
