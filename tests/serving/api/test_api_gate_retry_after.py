"""A request the SLO gate refuses gets a 429 whose Retry-After says when it would fit."""

from __future__ import annotations

from api_fakes import ROUTE_KEY, auth, make_plan, make_runtime
from fastapi.testclient import TestClient

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import SloGate
from serving.api.main import create_app

BODY = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 100, "max_output_tokens": 50}


def test_retry_after_is_the_wait_for_what_is_queued_ahead() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    # the replicas prefill 70× slower than predicted: a 50 ms prediction means 3.5 s
    for replica in ("h100-0", "h100-1"):
        for _ in range(200):
            gate.calibration.observe(replica, 1.0, 70.0)
    runtime = make_runtime(plan=make_plan(), slo_gate=gate)
    client = TestClient(create_app(runtime))
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.status_code == 429, r.text
    assert r.headers["Retry-After"] == "4"  # 3.5 s rounded up
    assert r.json()["retry_after_s"] == 4
