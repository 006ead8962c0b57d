"""Route latency while the planner re-solves: ``placement bench route --during-solve``.

The service as ``placement serve --demo`` runs it (8 emulated H100 replicas, the planner with
its solver worker process, a plan directory) in its own process. Its demand window is filled
with ``window`` requests over ``/v1/route:batch`` (4 tenants, ``prefixes`` shared prefixes of
1–6 blocks, then 0–4 blocks of their own; outcomes reported), and one solve is forced so the
plan covers that demand and the worker is warm. Then a load generator in another process sends
``POST /v1/route`` at ``rate`` req/s, open loop on keep-alive connections (latency counted from
when each request was due), reporting every decision's outcome in batches on a connection of
its own, as a router does:

* **without a solve**: ``duration_s`` seconds, the planner idle;
* **during a solve**: ``duration_s`` seconds while ``POST /v1/plan:solve`` keeps a re-solve
  running back to back (instance building from the whole window included); only requests due
  while a solve was in flight count.

The two alternate ``repeats`` times, so a change in the machine's other load falls on both.
Reported: p50/p99 of each (all runs pooled; and each run's p99), their ratio (target: p99
during ≤ 1.5 × p99 without), the solves' times and outcomes, and errors (non-200 answers).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.http_route import free_port, wait_for_server
from placement.report import print_table, write_json

RATE_RPS = 1_000.0
DURATION_S = 10.0
REPEATS = 3
WINDOW = 50_000  # the service's whole demand window (serving.wiring.DEMAND_WINDOW)
PREFIXES = 2_000
TENANTS = ("acme", "globex", "initech", "umbrella")
MODEL = "llama-3-8b"  # the demo fleet's
CONNECTIONS = 32
REPORT_EVERY_S = 0.05
TARGET_RATIO = 1.5
BENCH_KEY = "bench-key-0123456789"
BATCH = 256


def route_bodies(n: int, *, prefixes: int = PREFIXES, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` route requests: the same ``prefixes`` shared prefixes whatever the ``seed``, then
    blocks of their own drawn from ``seed``."""
    first = random.Random(0)
    shared = [[first.getrandbits(62) for _ in range(first.randint(1, 6))] for _ in range(prefixes)]
    rng = random.Random(seed)
    out = []
    for i in range(n):
        hashes = rng.choice(shared) + [rng.getrandbits(62) for _ in range(rng.randint(0, 4))]
        out.append(
            {
                "tenant": TENANTS[i % len(TENANTS)],
                "model": MODEL,
                "request_class": "interactive",
                "block_hashes": hashes,
                "input_tokens": 512 * len(hashes),
                "max_output_tokens": 128,
            }
        )
    return out


# --- the load generator (its own process) ---------------------------------------------------


def _route_request(body: bytes) -> bytes:
    head = (
        "POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {BENCH_KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, str | None]:
    """(status, decision id) of one request on a keep-alive connection."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length, decision = 0, None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"x-placement-decision-id":
            decision = value.strip().decode()
    await reader.readexactly(length)
    return int(head.split(b" ")[1]), decision


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


async def _post(
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], path: str, payload: Any
) -> tuple[int, bytes]:
    reader, writer = conn
    body = json.dumps(payload).encode()
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {BENCH_KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return int(head.split(b" ")[1]), await reader.readexactly(length)


async def _run_load(
    port: int, bodies: list[bytes], rate: float, duration: float, solve: bool
) -> dict[str, Any]:
    idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(CONNECTIONS):
        idle.put_nowait(await _connect(port))
    requests = [_route_request(b) for b in bodies]
    due_at: list[float] = []
    latency: list[float] = []
    errors = 0
    decided: list[str] = []
    done = asyncio.Event()

    async def one(i: int, due: float) -> None:
        nonlocal errors
        conn = await idle.get()
        status, decision = await _exchange(*conn, requests[i % len(requests)])
        idle.put_nowait(conn)
        due_at.append(due)
        latency.append(time.perf_counter() - due)
        errors += status != 200
        if decision is not None:
            decided.append(decision)

    async def report() -> None:  # outcomes, as a router reports them
        conn = await _connect(port)
        while not done.is_set() or decided:
            await asyncio.sleep(REPORT_EVERY_S)
            batch, decided[:] = decided[:1024], decided[1024:]
            if batch:
                await _post(conn, "/v1/outcomes", {"outcomes": [{"decision_id": d} for d in batch]})
        conn[1].close()

    solves: list[dict[str, Any]] = []

    async def keep_solving() -> None:
        conn = await _connect(port)
        while not done.is_set():
            t0 = time.perf_counter()
            status, body = await _post(conn, "/v1/plan:solve", {})
            answer = json.loads(body) if status == 200 else {"outcome": f"HTTP {status}"}
            solves.append({"start": t0, "end": time.perf_counter(), **answer})
        conn[1].close()

    loop = asyncio.get_running_loop()
    reporter = loop.create_task(report())
    solver = loop.create_task(keep_solving()) if solve else None
    start = time.perf_counter() + (0.5 if solve else 0.1)  # a solve under way first
    tasks = []
    for i in range(int(rate * duration)):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(loop.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    done.set()
    await reporter
    if solver is not None:
        await solver
    while not idle.empty():
        idle.get_nowait()[1].close()
    return {"due": due_at, "latency": latency, "errors": errors, "solves": solves}


def _load(
    port: int, bodies: list[bytes], rate: float, duration: float, solve: bool, out: Any
) -> None:
    import uvloop

    out.put(uvloop.run(_run_load(port, bodies, rate, duration, solve)))


def _measure(port: int, bodies: list[bytes], rate: float, duration: float, solve: bool) -> Any:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_load, args=(port, bodies, rate, duration, solve, out))
    proc.start()
    result = out.get()
    proc.join()
    return result


# --- the service under test -----------------------------------------------------------------


def _serve(port: int, plan_dir: Path, log: Any) -> subprocess.Popen[bytes]:
    from serving.api.security import hash_key

    key = {
        "name": "bench",
        "digest": hash_key(BENCH_KEY),
        "scopes": ["route", "telemetry", "admin"],
    }
    env = {
        **os.environ,
        "PLACEMENT_API_KEYS": json.dumps([key]),
        "PLACEMENT_SOLVE_PERIOD_S": "86400",  # only the start-up solve and the forced ones
    }
    command = "import sys; from placement.cli import app; sys.exit(app())"
    args = ["serve", "--demo", "--port", str(port), "--plan-dir", str(plan_dir)]
    return subprocess.Popen(
        [sys.executable, "-c", command, *args], env=env, stdout=log, stderr=subprocess.STDOUT
    )


def _fill_window(client: httpx.Client, bodies: list[dict[str, Any]]) -> None:
    for i in range(0, len(bodies), BATCH):
        r = client.post("/v1/route:batch", json={"requests": bodies[i : i + BATCH]})
        r.raise_for_status()
        ids = [x["decision"]["decision_id"] for x in r.json()["results"] if x["status"] == 200]
        if ids:
            outcomes = [{"decision_id": d, "output_tokens": 128} for d in ids]
            client.post("/v1/outcomes", json={"outcomes": outcomes}).raise_for_status()


def _until_planned(client: httpx.Client, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.get("/v1/plan").status_code == 200:
            return
        time.sleep(0.2)
    raise RuntimeError("the start-up solve installed no plan")


def _during_solve(run: dict[str, Any]) -> list[float]:
    """Latencies of the requests that were due while a solve was in flight."""
    intervals = [(s["start"], s["end"]) for s in run["solves"]]
    return [
        lat
        for due, lat in zip(run["due"], run["latency"], strict=True)
        if any(a <= due <= b for a, b in intervals)
    ]


def _percentiles_ms(values: list[float]) -> tuple[float, float]:
    """(p50, p99) of latencies in seconds, in milliseconds."""
    if not values:
        return float("nan"), float("nan")
    ordered = sorted(values)
    p50, p99 = (ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.50, 0.99))
    return p50 * 1e3, p99 * 1e3


def run_during_solve_bench(
    *,
    rate: float = RATE_RPS,
    duration_s: float = DURATION_S,
    repeats: int = REPEATS,
    window: int = WINDOW,
    prefixes: int = PREFIXES,
    out: Path | None = None,
) -> dict[str, Any]:
    port = free_port()
    fill = route_bodies(window, prefixes=prefixes, seed=0)
    load = [json.dumps(b).encode() for b in route_bodies(5_000, prefixes=prefixes, seed=1)]
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "serve.log"
        with log_path.open("wb") as log:
            server = _serve(port, Path(tmp) / "plans", log)
        try:
            wait_for_server(server, port)
            headers = {"Authorization": f"Bearer {BENCH_KEY}"}
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=600
            ) as client:
                _until_planned(client)
                t0 = time.perf_counter()
                _fill_window(client, fill)
                fill_s = time.perf_counter() - t0
                first = client.post("/v1/plan:solve").json()
            _measure(port, load, 500.0, 1.0, solve=False)  # warm-up
            idle_runs, busy_runs = [], []
            for _ in range(repeats):
                idle_runs.append(_measure(port, load, rate, duration_s, solve=False))
                busy_runs.append(_measure(port, load, rate, duration_s, solve=True))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        server_log = log_path.read_text()
    idle = [lat for run in idle_runs for lat in run["latency"]]
    during_runs = [_during_solve(run) for run in busy_runs]
    during = [lat for run in during_runs for lat in run]
    p50_idle, p99_idle = _percentiles_ms(idle)
    p50_busy, p99_busy = _percentiles_ms(during)
    solves = [s for run in busy_runs for s in run["solves"]]
    finished = [s for s in solves if "solve_s" in s]
    payload: dict[str, Any] = {
        "rate_rps": rate,
        "duration_s": duration_s,
        "repeats": repeats,
        "window": window,
        "prefixes": prefixes,
        "fill_s": fill_s,
        "first_solve": first,
        "requests_without_solve": len(idle),
        "requests_during_solve": len(during),
        "p50_ms_without_solve": p50_idle,
        "p99_ms_without_solve": p99_idle,
        "p50_ms_during_solve": p50_busy,
        "p99_ms_during_solve": p99_busy,
        "p99_ratio": p99_busy / p99_idle,
        "p99_ms_without_solve_per_run": [_percentiles_ms(r["latency"])[1] for r in idle_runs],
        "p99_ms_during_solve_per_run": [_percentiles_ms(r)[1] for r in during_runs],
        "target_ratio": TARGET_RATIO,
        "meets_target": p99_busy <= TARGET_RATIO * p99_idle,
        "solves": len(solves),
        "solve_s": [s["solve_s"] for s in finished],
        "solve_outcomes": [s.get("outcome") for s in solves],
        "errors_without_solve": sum(r["errors"] for r in idle_runs),
        "errors_during_solve": sum(r["errors"] for r in busy_runs),
        "server_log_tail": server_log[-2000:],
    }
    rows = [
        {"figure": k, "value": payload[k]}
        for k in (
            "rate_rps",
            "window",
            "requests_without_solve",
            "p50_ms_without_solve",
            "p99_ms_without_solve",
            "requests_during_solve",
            "p50_ms_during_solve",
            "p99_ms_during_solve",
            "p99_ratio",
            "solves",
            "errors_without_solve",
            "errors_during_solve",
        )
    ]
    if finished:
        times = sorted(payload["solve_s"])
        rows.append({"figure": "solve_s (median)", "value": times[len(times) // 2]})
    print_table(
        f"/v1/route over HTTP at {rate:,.0f} req/s, with and without a re-solve "
        f"({window:,}-request window)",
        rows,
        ("figure", "value"),
    )
    if out is not None:
        write_json(out, payload)
    return payload
