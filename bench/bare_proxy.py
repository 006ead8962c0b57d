"""The floor of a proxy hop in Python: the barest HTTP/1.1 pass-through, as a reference.

``python -m bench.bare_proxy --port P --addresses FILE [--policy least-in-flight]`` serves
``POST`` requests on ``P`` (any other method is answered ``200 {}`` on the spot: a readiness
check) and passes each on, body as it came, to one of the replicas in
``FILE`` (``placement emulate --addresses-out``: replica id → URL) over pooled keep-alive
connections, then passes the answer back whole. No routing decision worth the name (round
robin, or the replica with the fewest requests in flight, ties taken in turn), no auth, no
accounting, no tasks and no coroutines: the request's bytes are parsed by httptools and written
on from the parser's callbacks, on uvloop. What it adds over calling the replica directly is
what any Python proxy must add — one more loopback round trip and two more event-loop wakeups
— so ``python -m bench.gateway_ab --floor`` measures the gateway against it in the same rounds
(bench/RESULTS.md, "The gateway's added p50 at 500 req/s, decomposed").

Answers carry ``x-placement-replica`` (the replica's id), as the gateway's do. Not for
production: no timeouts, no retries, no streaming (a streamed answer is passed on when whole).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import deque
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import cast

import httptools
import uvloop

POLICIES = ("round-robin", "least-in-flight")
_READY = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
_BAD_GATEWAY = b'{"error": {"message": "the replica closed the connection", "code": 502}}'


class Replica:
    """One replica: where it is, its idle keep-alive connections, its requests in flight."""

    def __init__(self, replica_id: str, url: str) -> None:
        self.id = replica_id
        hostport = url.split("://", 1)[-1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.host, self.port = host, int(port)
        self.head = (
            b"POST %s HTTP/1.1\r\nhost: " + hostport.encode() + b"\r\ncontent-type: "
            b"application/json\r\ncontent-length: %d\r\n\r\n"
        )
        self.idle: deque[_Upstream] = deque()
        self.in_flight = 0


class Picker:
    """Which replica takes the next request."""

    def __init__(self, replicas: list[Replica], policy: str) -> None:
        if not replicas:
            raise ValueError("no replica to pass requests to")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}: one of {', '.join(POLICIES)}")
        self.replicas = replicas
        self.policy = policy
        self._turn = count()

    def pick(self) -> Replica:
        replicas = self.replicas
        n = len(replicas)
        start = next(self._turn) % n
        if self.policy == "round-robin":
            return replicas[start]
        best = replicas[start]
        for k in range(1, n):
            r = replicas[(start + k) % n]
            if r.in_flight < best.in_flight:
                best = r
        return best


class _Upstream(asyncio.Protocol):
    """A keep-alive connection to a replica, one request at a time."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.client: _Client | None = None
        self.pending = b""
        self.chunks: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self.pending:
            self.transport.write(self.pending)
            self.pending = b""

    def send(self, client: _Client, data: bytes) -> None:
        self.client = client
        if self.transport is None:
            self.pending = data  # written once connected
        else:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.chunks)
        self.chunks = []
        client, self.client = self.client, None
        self.replica.idle.append(self)
        if client is not None:
            client.answer(self.replica, self.parser.get_status_code(), body)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self in self.replica.idle:
            self.replica.idle.remove(self)
        client, self.client = self.client, None
        if client is not None:
            client.answer(self.replica, 502, _BAD_GATEWAY)


class _Client(asyncio.Protocol):
    """A client's connection: requests parsed, passed on, answered in turn."""

    def __init__(self, picker: Picker) -> None:
        self.picker = picker
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.chunks: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.chunks)
        self.chunks = []
        if self.parser.get_method() != b"POST":  # a readiness check: answered here
            if self.transport is not None:
                self.transport.write(_READY)
            return
        replica = self.picker.pick()
        replica.in_flight += 1
        data = replica.head % (self.url, len(body)) + body
        if replica.idle:
            replica.idle.pop().send(self, data)
            return
        upstream = _Upstream(replica)
        upstream.send(self, data)
        task = asyncio.get_running_loop().create_task(_connect(upstream))
        _CONNECTING.add(task)
        task.add_done_callback(_CONNECTING.discard)

    def answer(self, replica: Replica, status: int, body: bytes) -> None:
        replica.in_flight -= 1
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"x-placement-replica: %s\r\n\r\n%s"
            % (status, b"OK" if status == 200 else b"-", len(body), replica.id.encode(), body)
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


_CONNECTING: set[asyncio.Task[None]] = set()  # held until done (the loop keeps weak refs)


async def _connect(upstream: _Upstream) -> None:
    replica = upstream.replica
    loop = asyncio.get_running_loop()
    try:
        await loop.create_connection(lambda: upstream, replica.host, replica.port)
    except OSError:
        upstream.connection_lost(None)


def replicas_of(addresses: dict[str, str]) -> list[Replica]:
    """The replicas of an addresses file (id → URL), in its order."""
    return [Replica(replica_id, url) for replica_id, url in addresses.items()]


async def serve(port: int, picker: Picker, *, ready: Callable[[int], None] | None = None) -> None:
    """Serve on 127.0.0.1:``port`` (0: any free port, told to ``ready``) until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(picker), "127.0.0.1", port)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="the barest Python proxy hop, a reference")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--addresses", type=Path, required=True, help="replica id → URL (JSON)")
    parser.add_argument("--policy", choices=POLICIES, default="round-robin")
    args = parser.parse_args()
    addresses = json.loads(args.addresses.read_text())
    picker = Picker(replicas_of(addresses), args.policy)
    uvloop.run(serve(args.port, picker))


if __name__ == "__main__":
    main()
