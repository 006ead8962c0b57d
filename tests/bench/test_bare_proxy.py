"""The floor proxy (bench.bare_proxy) against scripted replicas on 127.0.0.1: bodies and statuses
passed through, the replica named, round robin, fewest in flight with ties in turn, a refused
replica answered 502, a readiness check answered on the spot; the gateway A/B's mirror targets
(bench.gateway_ab) and the probe's record of which replica answered (bench.gateway_latency)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from bench.bare_proxy import Picker, Replica, replicas_of, serve
from bench.gateway_ab import mirror_targets
from bench.gateway_latency import open_loop_phase
from bench.processes import free_port

Answer = Callable[[bytes], Awaitable[tuple[int, bytes]]]


async def _replica(answer: Answer) -> tuple[asyncio.Server, str]:
    """A keep-alive HTTP/1.1 replica: ``answer(request body)`` gives (status, body)."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                status, body = await answer(await reader.readexactly(length))
                writer.write(
                    b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n%s" % (status, len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def _proxy(picker: Picker) -> tuple[asyncio.Task[None], str]:
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(0, picker, ready=bound.set_result))
    return task, f"http://127.0.0.1:{await bound}"


def _echo(name: bytes, status: int = 200) -> Answer:
    async def answer(body: bytes) -> tuple[int, bytes]:
        return status, name + b":" + body

    return answer


def test_bodies_and_statuses_pass_through_round_robin_with_the_replica_named() -> None:
    async def main() -> list[tuple[int, str, bytes]]:
        a, url_a = await _replica(_echo(b"a"))
        b, url_b = await _replica(_echo(b"b", status=503))
        task, url = await _proxy(Picker(replicas_of({"ra": url_a, "rb": url_b}), "round-robin"))
        try:
            async with httpx.AsyncClient() as client:
                out = []
                for i in range(4):
                    r = await client.post(url + "/v1/completions", content=b"%d" % i)
                    out.append((r.status_code, r.headers["x-placement-replica"], r.content))
                ready = await client.get(url + "/health")
                assert (ready.status_code, ready.content) == (200, b"{}")
                return out
        finally:
            task.cancel()
            a.close()
            b.close()

    assert asyncio.run(main()) == [
        (200, "ra", b"a:0"),
        (503, "rb", b"b:1"),
        (200, "ra", b"a:2"),
        (503, "rb", b"b:3"),
    ]


def test_fewest_in_flight_passes_a_busy_replica_by() -> None:
    async def main() -> list[str]:
        release = asyncio.Event()

        async def slow(body: bytes) -> tuple[int, bytes]:
            await release.wait()
            return 200, b"slow"

        a, url_a = await _replica(slow)
        b, url_b = await _replica(_echo(b"b"))
        picker = Picker(replicas_of({"ra": url_a, "rb": url_b}), "least-in-flight")
        task, url = await _proxy(picker)
        try:
            async with httpx.AsyncClient() as client:
                held = asyncio.create_task(client.post(url + "/v1/completions", content=b"x"))
                while picker.replicas[0].in_flight == 0:
                    await asyncio.sleep(0.01)
                # ra holds one request: every next one goes to rb, whoever's turn it is
                names = [
                    (await client.post(url + "/v1/completions", content=b"y")).headers[
                        "x-placement-replica"
                    ]
                    for _ in range(3)
                ]
                release.set()
                names.append((await held).headers["x-placement-replica"])
                return names
        finally:
            task.cancel()
            a.close()
            b.close()

    assert asyncio.run(main()) == ["rb", "rb", "rb", "ra"]


def test_a_replica_that_refuses_connections_is_answered_502() -> None:
    async def main() -> int:
        dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        task, url = await _proxy(Picker(replicas_of({"gone": dead}), "round-robin"))
        try:
            async with httpx.AsyncClient() as client:
                return (await client.post(url + "/v1/completions", content=b"x")).status_code
        finally:
            task.cancel()

    assert asyncio.run(main()) == 502


def test_ties_in_flight_are_taken_in_turn() -> None:
    replicas = [Replica(f"r{i}", f"http://127.0.0.1:{9000 + i}") for i in range(3)]
    picker = Picker(replicas, "least-in-flight")
    assert [picker.pick().id for _ in range(4)] == ["r0", "r1", "r2", "r0"]
    replicas[1].in_flight = 1
    assert [picker.pick().id for _ in range(3)] == ["r2", "r2", "r0"]


def test_a_picker_needs_replicas_and_a_known_policy() -> None:
    with pytest.raises(ValueError, match="no replica"):
        Picker([], "round-robin")
    with pytest.raises(ValueError, match="unknown policy"):
        Picker([Replica("r", "127.0.0.1:1")], "random")


def test_mirror_targets_follow_the_router_and_fall_back_to_round_robin() -> None:
    addresses = {"r0": "http://h:0", "r1": "http://h:1"}
    assert mirror_targets(["r1", None, "r0", "gone"], addresses) == [
        "http://h:1",
        "http://h:1",
        "http://h:0",
        "http://h:1",
    ]
    assert mirror_targets([None, None], addresses) is None


def test_the_probe_records_which_replica_answered_each_request() -> None:
    async def main() -> dict[str, Any]:
        a, url_a = await _replica(_echo(b"a"))
        b, url_b = await _replica(_echo(b"b"))
        task, url = await _proxy(Picker(replicas_of({"ra": url_a, "rb": url_b}), "round-robin"))
        try:
            return await open_loop_phase([url], {"model": "m"}, {}, 100.0, 0.05)
        finally:
            task.cancel()
            a.close()
            b.close()

    phase = asyncio.run(main())
    assert phase["sent"] == 5 and phase["failed"] == 0
    assert phase["replicas"] == ["ra", "rb", "ra", "rb", "ra"]
