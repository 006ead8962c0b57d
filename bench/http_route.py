"""``/v1/route`` over real HTTP: uvicorn (uvloop, httptools) in one process serving the route
path, a load generator in another sending at a fixed rate on keep-alive connections; reports
the achieved rate and the p99 latency as the client sees it (connection to answer)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from serving.route import PlacementRoutePath, RouteQuery

RATE_RPS = 2000.0
DURATION_S = 5.0
CONNECTIONS = 32  # enough that a burst finds an idle connection at 2,000 req/s
BENCH_KEY = "bench-key-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_fixture(fixture: str, port: int) -> None:
    """The server process: the pickled replicas and plan behind the real app."""
    import uvicorn

    from serving.api.main import create_app
    from serving.api.runtime import build_runtime
    from serving.api.security import hash_key
    from serving.api.settings import ApiKey, Settings
    from serving.leases import LeaseTerms
    from serving.route import load_profile
    from serving.service import PlacementService

    with open(fixture, "rb") as f:
        states, plan = pickle.load(f)
    profile = load_profile()
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values()), profile=profile),
        in_flight_per_replica=1_000_000,  # measure the path, not admission refusals
        lease_terms=LeaseTerms(floor_s=0.5, ceiling_s=0.5),
    )
    for s in states:
        s.scraped_at = float("inf")  # never stale: there is no scraper here
        service.register_replica(s)
    service.install_plan(plan)
    settings = Settings(api_keys=(ApiKey(name="b", digest=hash_key(BENCH_KEY), scopes=("route",)),))
    runtime = build_runtime(settings, service=service, background=False)
    uvicorn.run(
        create_app(runtime),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="error",
        access_log=False,
    )


def _request(body: bytes) -> bytes:
    head = (
        "POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {BENCH_KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return int(head.split(b" ")[1])


async def _open_loop(
    port: int, bodies: list[bytes], rate: float, duration: float
) -> tuple[list[float], int, float]:
    """Send request i at ``start + i / rate`` on the first idle keep-alive connection; a
    request that finds every connection busy waits, and the wait counts in its latency."""
    idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(CONNECTIONS):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        idle.put_nowait((reader, writer))
    requests = [_request(b) for b in bodies]
    lat: list[float] = []
    errors = 0

    async def one(i: int, due: float) -> None:
        nonlocal errors
        conn = await idle.get()
        status = await _exchange(*conn, requests[i % len(requests)])
        idle.put_nowait(conn)
        # latency from when the request was due: a late send counts against the server
        lat.append(time.perf_counter() - due)
        errors += status != 200

    n = int(rate * duration)
    loop = asyncio.get_running_loop()
    start = time.perf_counter() + 0.1
    tasks = []
    for i in range(n):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(loop.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    while not idle.empty():
        idle.get_nowait()[1].close()
    return lat, errors, elapsed


def _load(port: int, bodies: list[bytes], rate: float, duration: float, out: Any) -> None:
    """The load-generating process: an open-loop client on uvloop."""
    import uvloop

    out.put(uvloop.run(_open_loop(port, bodies, rate, duration)))


def wait_for_server(server: subprocess.Popen[bytes], port: int, timeout_s: float = 120.0) -> None:
    """Until the server accepts connections (installing a 100k-group plan takes seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server did not listen on port {port} within {timeout_s:.0f} s")


def measure(
    path: PlacementRoutePath,
    queries: list[RouteQuery],
    *,
    rate: float = RATE_RPS,
    duration_s: float = DURATION_S,
) -> tuple[float, float, int]:
    """(achieved rps, p99 ms, errors) for ``rate`` req/s over ``duration_s``."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        fixture = str(Path(tmp) / "fixture.pkl")
        with open(fixture, "wb") as f:
            pickle.dump((path.replicas, path.plan), f)
        server = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"from bench.http_route import serve_fixture; serve_fixture({fixture!r}, {port})",
            ],
            env={**os.environ, "PLACEMENT_ENVIRONMENT": "production"},
        )
        try:
            wait_for_server(server, port)
            bodies = [
                json.dumps(
                    {
                        "tenant": q.tenant,
                        "model": q.model,
                        "request_class": "interactive",
                        "block_hashes": list(q.block_hashes),
                        "input_tokens": q.input_tokens,
                        "max_output_tokens": q.max_output_tokens,
                    }
                ).encode()
                for q in queries[:5000]
            ]
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            warm = ctx.Process(target=_load, args=(port, bodies, 500.0, 1.0, out))
            warm.start()
            out.get()
            warm.join()
            proc = ctx.Process(target=_load, args=(port, bodies, rate, duration_s, out))
            proc.start()
            lat, errors, elapsed = out.get()
            proc.join()
        finally:
            server.terminate()
            server.wait(timeout=10)
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3
    return len(lat) / elapsed, p99, errors
