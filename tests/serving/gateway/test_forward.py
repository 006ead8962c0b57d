"""The gateway's pooled upstream client against a scripted HTTP/1.1 replica on 127.0.0.1:
keep-alive reuse, whole and chunked answers, a connection the replica closed while idle, the
read timeout, and a refused connection."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import pytest

from serving.gateway.forward import ConnectFailed, Upstream, refused
from serving.gateway.settings import GatewaySettings

BODY = b'{"ok": 1}'
WHOLE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n" + BODY
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


async def _serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        try:
            await handler(reader, writer, accepted[-1])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", accepted


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_answers_are_read_whole_and_chunk_by_chunk_over_one_kept_connection() -> None:
    async def replica(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while True:
            request = await _read_request(reader)
            assert request.startswith(b"POST /v1/completions HTTP/1.1\r\n")
            if b'"stream"' in request:
                writer.write(STREAM_HEAD + b"6\r\ndata: \r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.write(b"3\r\na\n\n\r\n0\r\n\r\n")
            else:
                writer.write(WHOLE)
            await writer.drain()

    async def test() -> None:
        server, base, accepted = await _serve(replica)
        upstream = Upstream(GatewaySettings())
        try:
            for _ in range(3):
                response = await upstream.open(base, "/v1/completions", b'{"prompt": "x"}')
                assert (response.status, response.content_type) == (200, b"application/json")
                assert await response.read() == BODY
                response.release()
            response = await upstream.open(base, "/v1/completions", b'{"stream": true}')
            assert response.content_type == b"text/event-stream"
            pieces = []
            while (piece := await response.next_chunk()) is not None:
                pieces.append(piece)
            response.release()
            assert pieces == [b"data: ", b"a\n\n"]  # as they came, not buffered to the end
            assert len(accepted) == 1  # every request on the one kept-alive connection
        finally:
            await upstream.close()
            server.close()

    _run(test)


def test_a_connection_the_replica_closed_while_idle_is_replaced_without_an_error() -> None:
    async def replica(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _read_request(reader)
        writer.write(WHOLE)  # keep-alive by HTTP/1.1's default, then closed (an idle timeout)
        await writer.drain()

    async def test() -> None:
        server, base, accepted = await _serve(replica)
        upstream = Upstream(GatewaySettings())
        try:
            for _ in range(3):
                response = await upstream.open(base, "/v1/completions", b"{}")
                assert await response.read() == BODY
                response.release()
                await asyncio.sleep(0.05)  # the replica closes it meanwhile
            assert len(accepted) == 3
        finally:
            await upstream.close()
            server.close()

    _run(test)


def test_no_byte_within_the_read_timeout_fails_the_answer() -> None:
    async def replica(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _read_request(reader)
        writer.write(STREAM_HEAD + b"6\r\ndata: \r\n")
        await writer.drain()
        await asyncio.sleep(5)  # then silence

    async def test() -> None:
        server, base, _ = await _serve(replica)
        upstream = Upstream(GatewaySettings(read_timeout_s=0.2))
        try:
            response = await upstream.open(base, "/v1/completions", b"{}")
            assert await response.next_chunk() == b"data: "
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await response.next_chunk()
            assert time.monotonic() - started < 1.5
            response.release()
        finally:
            await upstream.close()
            server.close()

    _run(test)


def test_a_refused_connection_says_the_replica_is_not_there() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def test() -> None:
        upstream = Upstream(GatewaySettings())
        with pytest.raises(ConnectFailed) as caught:
            await upstream.open(f"http://127.0.0.1:{port}", "/v1/completions", b"{}")
        assert refused(caught.value)
        assert not refused(TimeoutError())
        await upstream.close()

    _run(test)
