"""What the gateway adds to a request: latency (p50/p99) over going straight to the replica, and
CPU per request, at a fixed request rate.

``placement bench gateway`` starts ``placement emulate`` (the fleet) and ``placement serve
--proxy`` (the gateway in front of it) as their own processes, then sends the same open-loop
stream of short requests (``rate`` per second for ``duration`` seconds; a short prompt, a few
output tokens) twice: straight to the replicas, round robin, and through the gateway. Each
request's latency is measured by the client from sending to the last byte. The added latency
is the gateway phase's percentile minus the direct phase's; the gateway's CPU per request is
its process's CPU time over the phase, less what it uses idle (scraping every replica's
``/metrics`` once a second), divided by the requests it served. The client is this
module's own small asyncio loop (aiohttp, keep-alive), the same in both phases.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
import psutil

from bench.emulator_speed import wait_emulator_ready
from bench.processes import free_port, start_placement, stop, wait_http
from placement.domain.fleet import load_fleet
from placement.errors import InputError
from placement.report import print_table, write_json
from serving.api.security import generate_key, hash_key

REPLICA_HEADER = "x-placement-replica"  # the replica a router sent the request to
IDLE_S = 5.0  # the gateway's idle CPU (replica scrapes) is measured this long and subtracted
COLUMNS = (
    "path",
    "requests",
    "failed",
    "achieved_rps",
    "latency_p50_ms",
    "latency_p99_ms",
    "added_p50_ms",
    "added_p99_ms",
    "cpu_us_per_request",
)


def run_gateway_bench(
    fleet_path: Path,
    *,
    rate: float,
    duration_s: float,
    stream: bool = False,
    max_tokens: int = 4,
    out: Path | None = None,
) -> dict[str, Any]:
    if rate <= 0 or duration_s <= 0 or max_tokens < 1:
        raise InputError("rate, duration and max tokens must be > 0", field="--rate/--duration")
    fleet = load_fleet(fleet_path)
    model = fleet.replicas[0].model.name
    key = generate_key()
    with tempfile.TemporaryDirectory() as tmp:
        addresses_file = Path(tmp) / "addresses.json"
        emulator = start_placement(
            [
                *("emulate", "--fleet", str(fleet_path), "--base-port", "0"),
                *("--admin-port", "0", "--addresses-out", str(addresses_file)),
            ],
            {},
        )
        gateway: subprocess.Popen[bytes] | None = None
        try:
            addresses = wait_emulator_ready(emulator, addresses_file)
            port = free_port()
            gateway = start_placement(
                [
                    *("serve", "--proxy", "--fleet", str(fleet_path)),
                    *("--addresses", str(addresses_file), "--port", str(port)),
                    *("--no-plan-fallback", "--plan-dir", str(Path(tmp) / "plans")),
                ],
                {
                    "PLACEMENT_API_KEYS": json.dumps(
                        [{"name": "bench", "digest": hash_key(key), "scopes": ["route"]}]
                    ),
                    "PLACEMENT_PLANNER": "false",
                },
            )
            gateway_url = f"http://127.0.0.1:{port}"
            wait_http(gateway, gateway_url + "/readyz")
            replicas = [addresses[r.id] for r in fleet.replicas]
            body = {"model": model, "max_tokens": max_tokens, "stream": stream}
            headers = {"Authorization": f"Bearer {key}"}
            # warm both paths (connections, caches), then measure
            asyncio.run(open_loop_phase(replicas, body, headers, rate, 1.0))
            asyncio.run(open_loop_phase([gateway_url], body, headers, rate, 1.0))
            fleet_proc = psutil.Process(emulator.pid)
            fleet_idle = _cores(fleet_proc, min(duration_s, IDLE_S))
            fleet0 = sum(fleet_proc.cpu_times()[:2])
            direct = asyncio.run(open_loop_phase(replicas, body, headers, rate, duration_s))
            fleet_busy = sum(fleet_proc.cpu_times()[:2]) - fleet0
            emulator_cpu_s = max(0.0, fleet_busy - fleet_idle * direct["wall_s"])
            proc = psutil.Process(gateway.pid)
            idle_cores = _cores(proc, min(duration_s, IDLE_S))  # scrapes, timers: not requests
            cpu0 = sum(proc.cpu_times()[:2])
            through = asyncio.run(open_loop_phase([gateway_url], body, headers, rate, duration_s))
            busy_s = sum(proc.cpu_times()[:2]) - cpu0
            gateway_cpu_s = max(0.0, busy_s - idle_cores * through["wall_s"])
            overhead = _overhead_p50(gateway_url)
        finally:
            for child in (gateway, emulator):
                if child is not None:
                    stop(child)
    rows = [
        _row("direct", direct, None, None),
        _row("gateway", through, direct, gateway_cpu_s),
    ]
    payload: dict[str, Any] = {
        "fleet": fleet.name,
        "rate_rps": rate,
        "duration_s": duration_s,
        "stream": stream,
        "max_tokens": max_tokens,
        "rows": rows,
        "added_latency_p50_ms": rows[1]["added_p50_ms"],
        "added_latency_p99_ms": rows[1]["added_p99_ms"],
        "cpu_us_per_request": rows[1]["cpu_us_per_request"],
        "gateway_pre_forward_p50_ms": overhead * 1e3,
        "gateway_idle_cores": idle_cores,
        # what answering the same requests costs the emulated fleet itself (direct phase)
        "emulator_cpu_us_per_request": emulator_cpu_s / max(1, direct["sent"]) * 1e6,
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    print_table(
        f"gateway vs direct: {rate:g} req/s for {duration_s:g} s on {fleet.name} "
        f"({'streamed' if stream else 'whole'} answers of {max_tokens} tokens)",
        rows,
        COLUMNS,
    )
    if out is not None:
        write_json(out, payload)
    return payload


def _cores(proc: psutil.Process, seconds: float) -> float:
    """CPU cores ``proc`` uses over ``seconds`` of wall time."""
    cpu0, t0 = sum(proc.cpu_times()[:2]), time.perf_counter()
    time.sleep(seconds)
    return (sum(proc.cpu_times()[:2]) - cpu0) / (time.perf_counter() - t0)


def _row(
    path: str, phase: dict[str, Any], direct: dict[str, Any] | None, cpu_s: float | None
) -> dict[str, Any]:
    lat = np.asarray(phase["latencies"])
    p50 = float(np.percentile(lat, 50)) * 1e3 if len(lat) else float("nan")
    p99 = float(np.percentile(lat, 99)) * 1e3 if len(lat) else float("nan")
    row: dict[str, Any] = {
        "path": path,
        "requests": phase["sent"],
        "failed": phase["failed"],
        "achieved_rps": phase["sent"] / phase["wall_s"],
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "added_p50_ms": None,
        "added_p99_ms": None,
        "cpu_us_per_request": None,
        "statuses": phase["statuses"],
    }
    if direct is not None:
        base = np.asarray(direct["latencies"])
        row["added_p50_ms"] = p50 - float(np.percentile(base, 50)) * 1e3
        row["added_p99_ms"] = p99 - float(np.percentile(base, 99)) * 1e3
    if cpu_s is not None and phase["sent"]:
        row["cpu_us_per_request"] = cpu_s / phase["sent"] * 1e6
    return row


async def open_loop_phase(
    targets: list[str],
    body: dict[str, Any],
    headers: dict[str, str],
    rate: float,
    duration_s: float,
) -> dict[str, Any]:
    """Open loop: one request every 1/rate s for duration_s, round robin over ``targets``
    (request ``i`` to ``targets[i % len(targets)]``: a list of one target per request sends
    each where it says). ``replicas[i]``: the replica that answered request ``i``, when the
    answer named it (``x-placement-replica``)."""
    n = max(1, int(rate * duration_s))
    latencies: list[float] = []
    failed = 0
    statuses: dict[str, int] = {}
    replicas: list[str | None] = [None] * n

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        nonlocal failed
        payload = {**body, "prompt": f"Request {i}: say something short."}
        url = targets[i % len(targets)] + "/v1/completions"
        sent = time.perf_counter()
        try:
            async with session.post(url, json=payload, headers=headers) as response:
                await response.read()
                ok = response.status == 200
                status = str(response.status)
                replicas[i] = response.headers.get(REPLICA_HEADER)
        except aiohttp.ClientError as exc:
            ok, status = False, type(exc).__name__
        statuses[status] = statuses.get(status, 0) + 1
        if ok:
            latencies.append(time.perf_counter() - sent)
        else:
            failed += 1

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        loop = asyncio.get_running_loop()
        start = loop.time()
        tasks = []
        for i in range(n):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(session, i)))
        await asyncio.gather(*tasks)
        wall = loop.time() - start
    return {
        "latencies": latencies,
        "failed": failed,
        "sent": n,
        "wall_s": wall,
        "statuses": statuses,
        "replicas": replicas,
    }


def _overhead_p50(url: str) -> float:
    """The gateway's own median pre-forward time, from its histogram (bucket upper bound)."""
    text = httpx.get(url + "/metrics", timeout=5).text
    buckets: list[tuple[float, float]] = []
    count = 0.0
    for line in text.splitlines():
        if line.startswith("placement_gateway_overhead_seconds_bucket"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("placement_gateway_overhead_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
    for upper, cumulative in buckets:
        if count and cumulative >= count / 2:
            return upper
    return float("nan")
