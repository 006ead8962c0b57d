"""Issue 19's greedy client over real HTTP, against the service as ``placement serve`` wires it:
a tenants file, the demo fleet's 8 H100 replicas emulated on 127.0.0.1 (vLLM /metrics), the
real route path and admission, uvicorn on a free port. Tenant ``greedy`` takes 600 decisions
and never reports one; the credited tenant and a brand-new one are still answered, and the
greedy leases expire by their predicted completion."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from placement.domain.fleet import load_fleet
from placement.paths import repo_root
from serving.api.security import hash_key
from serving.api.settings import ApiKey, Settings
from serving.wiring import build_app
from sim.emulator import EmulatorOptions, EmulatorThread

KEY = "gateway-key-0123456789"
FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"
LEASE_FLOOR_S = 2.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("tenants:\n  steady: {credit_share: 0.3}\n")
    settings = Settings(
        api_keys=(ApiKey(name="gateway", digest=hash_key(KEY), scopes=("route", "admin")),),
        fleet=FLEET,
        tenants_file=tenants,
        plan_dir=tmp_path / "plans",
        planner=False,  # follow the (empty) store: no solves in this test
        no_plan_fallback=True,
        lease_margin=1.0,
        lease_floor_s=LEASE_FLOOR_S,
    )
    fleet = load_fleet(FLEET)
    emulator = EmulatorThread(fleet, EmulatorOptions(base_port=0)).start()
    port = _free_port()
    addresses = emulator.addresses()
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(settings, addresses=addresses),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            time.sleep(0.01)
        assert server.started
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        emulator.stop()
    assert not thread.is_alive()


def _route(client: httpx.Client, tenant: str, n: int) -> Counter[int]:
    """``n`` requests of ``tenant`` through ``/v1/route:batch``: their statuses."""
    statuses: Counter[int] = Counter()
    for start in range(0, n, 256):
        body = {
            "requests": [
                {
                    "tenant": tenant,
                    "model": "llama-3-8b",
                    "prompt": f"{tenant} request {i}: summarise the following text …",
                    "max_output_tokens": 64,
                }
                for i in range(start, min(n, start + 256))
            ]
        }
        r = client.post("/v1/route:batch", json=body)
        assert r.status_code == 200, r.text
        statuses.update(item["status"] for item in r.json()["results"])
    return statuses


def test_a_client_that_never_reports_locks_nobody_out(base_url: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=10) as client:
        one = {"tenant": "steady", "model": "llama-3-8b", "prompt": "hello"}
        assert client.post("/v1/route", json=one).status_code == 200
        started = time.monotonic()
        greedy = _route(client, "greedy", 600)
        # 8 replicas × 64 = 512 in flight; the steady tenant's 30 % (153) stays free
        assert greedy == {200: 512 - 153, 429: 600 - (512 - 153)}
        assert _route(client, "steady", 152) == {200: 152}  # all of its credit
        assert _route(client, "newcomer", 20) == {200: 20}  # a tenant never seen before
        assert time.monotonic() - started < LEASE_FLOOR_S, "too slow to test the bound"
        # the greedy leases expire by their predicted completion (here: the floor)
        time.sleep(max(0.0, started + LEASE_FLOOR_S + 0.5 - time.monotonic()))
        assert _route(client, "greedy", 10) == {200: 10}
        metrics = client.get("/metrics").text
    expired = next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("placement_lease_expiries_total")
    )
    assert expired >= 64  # each decision releases up to 64 expired leases
