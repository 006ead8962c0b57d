"""The pooled HTTP/1.1 client that carries requests to replicas.

vLLM and SGLang serve HTTP/1.1 through uvicorn, so there is no HTTP/2 to negotiate. Each
replica has a pool of keep-alive connections; a connection is an asyncio protocol with an
httptools response parser, and a request is written with one ``write`` (head and body). The
answer's bytes are handed on as they are parsed (no decompression, no header objects: only the
status and the content type are read). General clients do more than a pass-through needs:
httpx inspects every pooled connection on every request (a socket call each), aiohttp builds
header multidicts, payload objects, tracing hooks and a timer per request (``bench/RESULTS.md``,
"The gateway's CPU per request, cut").

Timeouts: connecting is short (a replica that does not accept is tried no longer); reading
waits up to ``read_timeout_s`` between two bytes (a long generation is not a failure), checked
by one periodic sweep over the open connections rather than a timer per request. A
connection that was idle in the pool and is found closed before any byte of the answer is
replaced by a new one once (the replica closed it while idle: the request never reached it).
"""

from __future__ import annotations

import asyncio
import errno
from collections import deque
from typing import cast

import httptools

from serving.gateway.settings import GatewaySettings

# a try failed before any answer because nothing listens there: the replica is down (marked
# down at once). A connect timeout is not proof: an overloaded replica accepts late.
DOWN_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
_REQUEST_HEAD = (
    b" HTTP/1.1\r\ncontent-type: application/json\r\n"
    b"accept: application/json, text/event-stream\r\nhost: "
)


class UpstreamError(Exception):
    """The replica's connection failed (closed early, malformed answer, read timeout)."""


class ConnectFailed(UpstreamError):
    """Connecting to the replica failed; :attr:`errno` says why when the system did."""

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_


# anything the replica's connection can do wrong, before or during an answer
UPSTREAM_ERRORS: tuple[type[Exception], ...] = (UpstreamError, OSError, TimeoutError)


def refused(exc: BaseException) -> bool:
    """Did connecting fail because the replica is not there (refused, unreachable)?"""
    return isinstance(exc, ConnectFailed) and exc.errno in DOWN_ERRNOS


def base_url(address: str) -> str:
    """A replica address as a URL prefix (``10.0.0.1:8000`` → ``http://10.0.0.1:8000``)."""
    address = address.rstrip("/")
    return address if "://" in address else "http://" + address


class Response:
    """One answer being read: its status and content type once its head is in, then its body
    as it arrives (:meth:`read` whole, or :meth:`next_chunk` piece by piece)."""

    __slots__ = ("_chunks", "_conn", "_error", "_waiter", "complete", "content_type", "status")

    def __init__(self, conn: _Connection) -> None:
        self._conn: _Connection | None = conn
        self._chunks: list[bytes] = []
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self.complete = False
        self.status = 0
        self.content_type = b""

    async def read(self) -> bytes:
        """The whole body."""
        while not self.complete:
            await self._wait()
        return b"".join(self._chunks)

    async def next_chunk(self) -> bytes | None:
        """The body's bytes received since the last call (waiting for some); None at its end."""
        while not self._chunks:
            if self.complete:
                return None
            await self._wait()
        chunks = self._chunks
        self._chunks = []
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if not self.complete:
            self._error = exc
            self._wake()

    def release(self) -> None:
        """Done with this answer: its connection goes back to the pool when the answer was read
        to its end, and is closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.finished(self)


class _Connection(asyncio.Protocol):
    """One keep-alive connection to a replica, carrying one request at a time."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.head: asyncio.Future[None] | None = None
        self.reusable = False
        self.received = False  # a byte of the current answer came
        self.reused = False  # the current request went on a connection from the pool
        self.last_read = 0.0

    # ---- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.received = True
        self.last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._broken(UpstreamError(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pool.upstream.connections.discard(self)
        self.reusable = False
        self.pool.forget(self)
        self._broken(
            UpstreamError("the replica closed the connection")
            if exc is None
            else UpstreamError(f"connection lost: {exc!r}")
        )

    # ---- httptools callbacks -------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 12 and name.lower() == b"content-type" and self.response is not None:
            self.response.content_type = value

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None:
            return
        response.status = self.parser.get_status_code()
        head = self.head
        if head is not None and not head.done():
            head.set_result(None)

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is not None:
            response._chunks.append(body)
            response._wake()

    def on_message_complete(self) -> None:
        response = self.response
        self.reusable = self.parser.should_keep_alive()
        if response is not None:
            response.complete = True
            response._wake()

    # ---- one request ---------------------------------------------------------------------
    def send(self, head: bytes, body: bytes, *, reused: bool) -> Response:
        assert self.transport is not None
        response = self.response = Response(self)
        self.head = self.loop.create_future()
        self.received = False
        self.reused = reused
        self.reusable = False
        self.last_read = self.loop.time()
        self.pool.upstream.watch()
        self.transport.write(head + body)  # one send; writelines costs more under uvloop
        return response

    def finished(self, response: Response) -> None:
        if response is not self.response:
            return
        self.response = None
        self.head = None
        if response.complete and self.reusable and self.transport is not None:
            self.pool.put_back(self)
        else:
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        self.pool.forget(self)

    def check_read_timeout(self, now: float) -> None:
        """Give up on the answer in flight when no byte of it came for ``read_timeout_s``."""
        if self.response is not None and now - self.last_read >= self.pool.read_timeout_s:
            self._broken(TimeoutError("no byte from the replica within the read timeout"))
            self.close()

    def _broken(self, exc: BaseException) -> None:
        head = self.head
        if head is not None and not head.done():
            head.set_exception(exc)
        if self.response is not None:
            self.response._fail(exc)


class _Pool:
    """The idle keep-alive connections to one replica."""

    def __init__(self, upstream: Upstream, host: str, port: int) -> None:
        self.upstream = upstream
        self.loop = upstream.loop
        self.host, self.port = host, port
        self.host_header = f"{host}:{port}".encode()
        self.read_timeout_s = upstream.settings.read_timeout_s
        self.idle: deque[_Connection] = deque()

    async def connect(self) -> _Connection:
        settings = self.upstream.settings
        try:
            transport, conn = await asyncio.wait_for(
                self.loop.create_connection(lambda: _Connection(self), self.host, self.port),
                settings.connect_timeout_s,
            )
        except TimeoutError:
            raise ConnectFailed(f"connect to {self.host}:{self.port} timed out") from None
        except OSError as exc:
            raise ConnectFailed(
                f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}", exc.errno
            ) from None
        if transport.is_closing():
            raise ConnectFailed(f"{self.host}:{self.port} closed the connection at once")
        conn.transport = transport  # uvloop calls connection_made after this returns
        self.upstream.connections.add(conn)
        return conn

    def take(self) -> _Connection | None:
        while self.idle:
            conn = self.idle.pop()  # the most recently used: least likely closed by the peer
            if conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    def put_back(self, conn: _Connection) -> None:
        self.idle.append(conn)

    def forget(self, conn: _Connection) -> None:
        if conn in self.idle:
            self.idle.remove(conn)


class Upstream:
    """Requests to replicas over pooled keep-alive connections. When ``max_connections`` are
    open, an idle one is closed before a new one opens; a request never waits for a connection
    (with every connection busy the count goes over the limit until some close)."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self._pools: dict[str, _Pool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.connections: set[_Connection] = set()  # open, idle or carrying a request
        # read timeouts are checked by one timer for all connections, not one per request
        self._sweep_s = min(1.0, settings.read_timeout_s / 4)
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _pool(self, base: str) -> _Pool:
        pool = self._pools.get(base)
        if pool is None:
            hostport = base.split("://", 1)[-1].rstrip("/")
            host, _, port = hostport.rpartition(":")
            if not host:
                host, port = hostport, "80"
            pool = self._pools[base] = _Pool(self, host.strip("[]"), int(port))
        return pool

    async def open(self, base: str, path: str, body: bytes) -> Response:
        """Send the request; the answer's status and content type are in, its body not yet
        read (the caller :meth:`Response.release`\\ s it)."""
        pool = self._pool(base)
        head = b"".join(
            (
                b"POST ",
                path.encode(),
                _REQUEST_HEAD,
                pool.host_header,
                b"\r\ncontent-length: ",
                str(len(body)).encode(),
                b"\r\n\r\n",
            )
        )
        conn = pool.take()
        if conn is not None:
            try:
                return await self._send(conn, head, body, reused=True)
            except UpstreamError:
                if conn.received:
                    raise
                # closed by the replica while idle: the request never reached it
        return await self._send(await self._connect(pool), head, body, reused=False)

    async def _connect(self, pool: _Pool) -> _Connection:
        if len(self.connections) >= self.settings.max_connections:
            self._close_one_idle()
        return await pool.connect()

    def _close_one_idle(self) -> None:
        for pool in self._pools.values():
            if pool.idle:
                pool.idle.popleft().close()
                return

    async def _send(self, conn: _Connection, head: bytes, body: bytes, *, reused: bool) -> Response:
        response = conn.send(head, body, reused=reused)
        assert conn.head is not None
        try:
            await conn.head
        except BaseException:
            response.release()
            raise
        return response

    def watch(self) -> None:
        """Make sure the read-timeout sweep runs (while any connection is open)."""
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self._sweep_s, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        if not self.connections:
            return
        now = self.loop.time()
        for conn in list(self.connections):
            conn.check_read_timeout(now)
        self.watch()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self.connections):
            conn.close()
        self.connections.clear()
        self._pools.clear()
        await asyncio.sleep(0)  # the transports' connection_lost callbacks run
