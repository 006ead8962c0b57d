"""`POST /v1/whatif` in the demo service: the planner's own demand, some replica counts
changed, solved in the worker; bad kinds named."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from serving.whatif_job import _scaled, _with_counts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never answered")


def test_whatif_solves_in_the_demo_service(tmp_path: Path) -> None:
    port = _free_port()
    child = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "placement"),
            "serve",
            "--demo",
            "--port",
            str(port),
            "--plan-dir",
            str(tmp_path / "plans"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{base}/readyz", time.monotonic() + 180)
        from placement.cli.announce import dev_key

        auth = {"Authorization": f"Bearer {dev_key()}"}
        body = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 800}
        for _ in range(30):
            assert httpx.post(f"{base}/v1/route", json=body, headers=auth).status_code == 200
        r = httpx.post(f"{base}/v1/whatif", json={"replicas": {"h100": 4}}, headers=auth)
        assert r.status_code == 202, r.text
        job = r.json()
        deadline = time.monotonic() + 120
        while job["status"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.5)
            job = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=auth).json()
        assert job["status"] == "done", job
        result: dict[str, Any] = job["result"]
        assert result["replicas"] == 4 and result["demand_requests"] == 30
        assert result["status"] in ("optimal", "feasible", "greedy")
        assert 0.0 <= result["predicted_attainment"] <= 1.0
        bad = httpx.post(f"{base}/v1/whatif", json={"replicas": {"b200": 1}}, headers=auth)
        job = bad.json()
        while job["status"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.5)
            job = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=auth).json()
        assert job["status"] == "failed" and "b200" in job["error"]
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=30)


def test_counts_change_only_known_kinds() -> None:
    doc = {"name": "f", "replicas": [{"kind": "h100", "count": 2}, {"kind": "l40s", "count": 1}]}
    assert [g["count"] for g in _with_counts(doc, {"l40s": 0})["replicas"]] == [2]
    with pytest.raises(Exception, match="a100"):
        _with_counts(doc, {"a100": 1})


def test_demand_scales_per_tenant_deterministically() -> None:
    from placement.domain.requests import Request

    reqs = [Request(i, float(i), 10, 5, tenant="a" if i % 2 else "b") for i in range(1000)]
    scaled = _scaled(reqs, {"a": 2.5})
    a = sum(1 for r in scaled if r.tenant == "a")
    assert 1100 < a < 1400 and sum(1 for r in scaled if r.tenant == "b") == 500
    assert [r.id for r in _scaled(reqs, {"a": 2.5})] == [r.id for r in scaled]
