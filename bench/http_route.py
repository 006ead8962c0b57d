"""``/v1/route`` over real HTTP: the service's own server stack (:func:`serving.api.server.
serve_app`: uvicorn, uvloop, the route answered in the HTTP protocol) in one process serving
the route path, and wrk (C, keep-alive connections, ``bench/wrk/route.lua``) sending ``POST
/v1/route`` bodies at a fixed rate from another.

Reported per run and as the median of ``runs`` runs on the same server: the achieved rate
(``rps``), wrk's latency percentiles (send to answer), and the server process's CPU time
(user + system, from /proc) over the run divided by the decisions it answered
(``cpu_us_per_decision``). Non-2xx answers and socket errors are counted as ``errors``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import psutil

from placement.errors import PlacementError
from placement.plan import Plan
from serving.api.runtime import ServiceRuntime
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery

RATE_RPS = 2000.0
DURATION_S = 10.0
RUNS = 3
WARM_S = 2
THREADS = 1  # one wrk thread keeps up with 2,000 req/s and leaves the server the other core
CONNECTIONS = 16  # enough that a burst finds an idle connection at 2,000 req/s
BENCH_KEY = "bench-key-0123456789"
LUA = Path(__file__).with_name("wrk") / "route.lua"
BODIES = 5_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_fixture(fixture: str, port: int) -> None:
    """The server process: the pickled replicas and plan behind the real app, served as
    ``placement serve`` serves it."""
    from serving.api.main import create_app
    from serving.api.server import serve_app

    with open(fixture, "rb") as f:
        states, plan = pickle.load(f)
    runtime = fixture_runtime(states, plan)
    serve_app(create_app(runtime), host="127.0.0.1", port=port, log_level="error")


def fixture_runtime(states: list[ReplicaState], plan: Plan | None) -> ServiceRuntime:
    """The service's runtime on these replicas and plan, as the server process builds it: the
    default route profile, no admission refusals, leases of 0.5 s, one key (:data:`BENCH_KEY`)
    with the route scope."""
    from serving.api.runtime import build_runtime
    from serving.api.security import hash_key
    from serving.api.settings import ApiKey, Settings
    from serving.leases import LeaseTerms
    from serving.route import load_profile
    from serving.service import PlacementService

    profile = load_profile()
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values()), profile=profile),
        in_flight_per_replica=1_000_000,  # measure the path, not admission refusals
        lease_terms=LeaseTerms(floor_s=0.5, ceiling_s=0.5),
    )
    # each registration rebuilds the fleet view (hash rings over every replica): build it once
    with mock.patch.object(service, "_rebuild", lambda: None):
        for s in states:
            s.scraped_at = float("inf")  # never stale: there is no scraper here
            service.register_replica(s)
    service._rebuild()
    service.install_plan(plan)
    settings = Settings(api_keys=(ApiKey(name="b", digest=hash_key(BENCH_KEY), scopes=("route",)),))
    return build_runtime(settings, service=service, background=False)


def wait_for_server(server: subprocess.Popen[bytes], port: int, timeout_s: float = 300.0) -> None:
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


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise PlacementError(
            "wrk (the HTTP load generator) is not installed: apt-get install -y wrk "
            "(make bench-route installs it)"
        )
    return found


def run_wrk(port: int, bodies: Path, rate: float, duration_s: float) -> dict[str, Any]:
    """One wrk run: its JSON line (bench/wrk/route.lua ``done``)."""
    threads = THREADS
    result = subprocess.run(
        [
            wrk_binary(),
            f"-t{threads}",
            f"-c{CONNECTIONS}",
            f"-d{max(1, round(duration_s))}s",
            "-s",
            str(LUA),
            f"http://127.0.0.1:{port}",
            "--",
            str(bodies),
            str(rate / threads),
            BENCH_KEY,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({result.returncode}): {result.stdout}{result.stderr}")
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def measure_server(
    port: int, pid: int, bodies: Path, *, rate: float, duration_s: float, runs: int
) -> dict[str, Any]:
    """``runs`` wrk runs against a listening server (after a short warm-up): each run's figures
    and their medians."""
    run_wrk(port, bodies, min(rate, 500.0), WARM_S)
    server = psutil.Process(pid)
    each = []
    for _ in range(runs):
        before = server.cpu_times()
        w = run_wrk(port, bodies, rate, duration_s)
        after = server.cpu_times()
        cpu_s = (after.user + after.system) - (before.user + before.system)
        requests = max(1, int(w["requests"]))
        each.append(
            {
                "rps": w["requests"] / (w["duration_us"] / 1e6),
                "p50_ms": w["p50_us"] / 1e3,
                "p99_ms": w["p99_us"] / 1e3,
                "p999_ms": w["p999_us"] / 1e3,
                "max_ms": w["max_us"] / 1e3,
                "cpu_us_per_decision": cpu_s / requests * 1e6,
                "errors": int(w["non_2xx"]) + int(w["socket_errors"]),
            }
        )
    medians = {k: statistics.median(r[k] for r in each) for k in each[0] if k != "errors"}
    return {**medians, "errors": sum(r["errors"] for r in each), "runs": each}


def request_body(q: RouteQuery) -> str:
    return json.dumps(
        {
            "tenant": q.tenant,
            "model": q.model,
            "request_class": q.request_class,
            "block_hashes": list(q.block_hashes),
            "input_tokens": q.input_tokens,
            "max_output_tokens": q.max_output_tokens,
        }
    )


def measure(
    path: PlacementRoutePath,
    queries: list[RouteQuery],
    *,
    rate: float = RATE_RPS,
    duration_s: float = DURATION_S,
    runs: int = RUNS,
) -> dict[str, Any]:
    """The figures of :func:`measure_server` for this path's replicas and plan served by the
    service's stack, with the first :data:`BODIES` queries as bodies."""
    wrk_binary()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        fixture = str(Path(tmp) / "fixture.pkl")
        with open(fixture, "wb") as f:
            pickle.dump((path.replicas, path.plan), f)
        bodies = Path(tmp) / "bodies.jsonl"
        bodies.write_text("".join(request_body(q) + "\n" for q in queries[:BODIES]))
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
            return measure_server(
                port, server.pid, bodies, rate=rate, duration_s=duration_s, runs=runs
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
