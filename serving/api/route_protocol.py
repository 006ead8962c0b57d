"""uvicorn's HTTP protocol (httptools) with ``POST /v1/route`` answered inside it.

Under uvicorn every request becomes an ASGI scope, a task, an event and two ``send`` messages
before and after the application runs: for a decision of tens of microseconds that is most of
the cost. A decision is synchronous, so this protocol answers ``POST /v1/route`` where the
request is complete: :func:`serving.api.fast_route.answer_read` gives the bytes, one
``transport.write`` sends them, and the connection's keep-alive timer is armed as uvicorn
does. Every other request, a pipelined one behind an unanswered request and an upgrade go
through uvicorn's own path to the application untouched (where
:class:`~serving.api.fast_route.FastRoute` answers ``/v1/route`` the same way).

Most route requests arrive as one read holding exactly one plain request (``POST /v1/route
HTTP/1.1``, header lines as the parser accepts them, a ``Content-Length`` and that many bytes
of body). Such a read is answered from a split of its bytes, without the parser's ten calls
back into Python; any other read (a request split across reads, several in one, chunked,
``Expect``, ``Upgrade``, an odd header line) goes to the parser as before.
"""

from __future__ import annotations

import re
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from serving.api.fast_route import ROUTE_PATH, RouteHead, answer_read, read_head
from serving.api.runtime import ServiceRuntime

_ROUTE_URL = ROUTE_PATH.encode()
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_CLOSE_END = b"connection: close\r\n\r\n"
_REQUEST_LINE = b"POST " + _ROUTE_URL + b" HTTP/1.1\r\n"
# header lines as the parser takes them: a token, a colon, then visible characters, spaces and
# tabs (no control characters, no folded continuation lines)
_HEADER_LINES = re.compile(rb"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*\r\n)*")
_TO_PARSER = frozenset((b"transfer-encoding", b"expect", b"upgrade"))

Headers = list[tuple[bytes, bytes]]


# what the header lines tell the answer (read once, fast_route.read_head), content length,
# keep-alive
PlainHead = tuple[RouteHead, int, bool]


def _plain_head(head: bytes) -> PlainHead | None:
    """The header lines of a plain route request, read; None when they are not plain (the
    parser takes the request)."""
    if _HEADER_LINES.fullmatch(head) is None:
        return None
    length = -1
    keep_alive = True
    headers: Headers = []
    for line in head.split(b"\r\n")[:-1]:
        name, _, value = line.partition(b":")
        name = name.lower()
        value = value.strip(b" \t")
        if name == b"content-length":
            if length >= 0 or not value.isdigit():
                return None
            length = int(value)
        elif name in _TO_PARSER:
            return None
        elif name == b"connection":
            token = value.lower()
            if token == b"close":
                keep_alive = False
            elif token != b"keep-alive":
                return None
        headers.append((name, value))
    if length < 0:
        return None
    return read_head(headers), length, keep_alive


# A client sends the same header lines again and again (only the length changes with the
# body): each distinct block is read once. Bounded in count and size, so odd clients cannot
# grow it; the same bytes always read the same, so keeping them changes no answer.
_heads: dict[bytes, PlainHead | None] = {}
_UNSEEN: PlainHead | None = ((None, -1, False), -1, False)
_MAX_HEADS_KEPT = 4096
_MAX_HEAD_KEPT = 1024


class RouteProtocol(HttpToolsProtocol):
    """Set :attr:`runtime` on a subclass (:func:`route_protocol`) before serving."""

    runtime: ServiceRuntime
    _fast = False
    _keep_alive = True
    _size = 0
    _chunks: list[bytes]
    _between_messages = True  # the parser holds no part of a request
    _answered_at = 0.0  # the loop's time of the last answer here (keep-alive counts from it)

    def data_received(self, data: bytes) -> None:
        if self._between_messages and data.startswith(_REQUEST_LINE) and self._plain(data):
            return
        super().data_received(data)

    def _plain(self, data: bytes) -> bool:
        """Answer ``data`` when it is exactly one plain route request (see the module doc)."""
        end = data.find(b"\r\n\r\n", len(_REQUEST_LINE) - 2)
        if end < 0:
            return False
        head = data[len(_REQUEST_LINE) : end + 2]
        known = _heads.get(head, _UNSEEN)
        if known is _UNSEEN:
            known = _plain_head(head)
            if len(head) <= _MAX_HEAD_KEPT and len(_heads) < _MAX_HEADS_KEPT:
                _heads[head] = known
        if known is None:
            return False
        route_head, length, keep_alive = known
        body_at = end + 4
        if length > self.runtime.settings.max_body_bytes or len(data) != body_at + length:
            return False
        previous = self.cycle
        if previous is not None and not previous.response_complete:
            return False
        # an armed keep-alive timer stays: when it fires it counts from the last answer
        self._respond(route_head, data[body_at:], keep_alive)
        return True

    def on_message_begin(self) -> None:
        self._between_messages = False
        super().on_message_begin()

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
        self._between_messages = True
        if not self._fast:
            super().on_message_complete()
            return
        self._fast = False
        within = self._size <= self.runtime.settings.max_body_bytes
        body = b"".join(self._chunks) if within else None
        self._chunks = []
        self._respond(read_head(self.headers), body, self._keep_alive)

    def _respond(self, route_head: RouteHead, body: bytes | None, keep_alive: bool) -> None:
        status, head, payload = answer_read(self.runtime, route_head, body)
        self.transport.write(
            b"".join(
                (
                    STATUS_LINE[status],
                    _default_head(self.server_state.default_headers),
                    head,
                    b"\r\n" if keep_alive else _CLOSE_END,
                    payload,
                )
            )
        )
        self.server_state.total_requests += 1
        if not keep_alive:
            self.transport.close()
            return
        self._answered_at = self.loop.time()
        if self.timeout_keep_alive_task is None and not self.transport.is_closing():
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    def timeout_keep_alive_handler(self) -> None:
        """The keep-alive timer (this protocol's or one uvicorn armed after an answer of its
        own): close an idle connection, or wait out the rest of the idle time after the last
        answer given here. One timer a connection, not one a request."""
        self.timeout_keep_alive_task = None
        idle = self.loop.time() - self._answered_at
        if idle < self.timeout_keep_alive:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive - idle, self.timeout_keep_alive_handler
            )
        else:
            super().timeout_keep_alive_handler()


class _DefaultHead:
    """uvicorn's default header lines (server, date) as bytes: uvicorn replaces the list when
    the date ticks, so the bytes are made once a tick."""

    def __init__(self) -> None:
        self._of: object = None
        self._head = b""

    def __call__(self, default_headers: list[tuple[bytes, bytes]]) -> bytes:
        if self._of is not default_headers:
            self._head = b"".join(name + b": " + value + b"\r\n" for name, value in default_headers)
            self._of = default_headers
        return self._head


_default_head = _DefaultHead()


def route_protocol(runtime: ServiceRuntime) -> type[RouteProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for this runtime."""
    attrs: dict[str, Any] = {"runtime": runtime}
    return type("RuntimeRouteProtocol", (RouteProtocol,), attrs)
