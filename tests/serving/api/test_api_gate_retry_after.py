"""A request the SLO gate refuses gets a 429 whose Retry-After says when it would fit."""

from __future__ import annotations

import dataclasses

from api_fakes import (
    ROUTE_KEY,
    FakeRoutePath,
    auth,
    keys,
    make_plan,
    make_runtime,
    replica,
)
from fastapi.testclient import TestClient

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import SloGate
from serving.api.main import create_app
from serving.api.runtime import build_runtime
from serving.api.settings import Settings
from serving.route.ttft import prefill_table
from serving.route.types import Decision, RouteQuery
from serving.service import PlacementService

BODY = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 100, "max_output_tokens": 50}


def test_retry_after_is_the_wait_for_what_is_queued_ahead() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    # the replicas prefill 70× slower than predicted: a 50 ms prediction means 3.5 s
    for replica_id in ("h100-0", "h100-1"):
        for _ in range(200):
            gate.calibration.observe(replica_id, 1.0, 70.0)
    runtime = make_runtime(plan=make_plan(), slo_gate=gate)
    client = TestClient(create_app(runtime))
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.status_code == 429, r.text
    assert r.headers["Retry-After"] == "4"  # 3.5 s rounded up
    assert r.json()["retry_after_s"] == 4


class _PrefillPredicted(FakeRoutePath):
    """The fake route path, predicting the TTFT of the whole prompt on an idle H100."""

    def decide(self, query: RouteQuery, now: float) -> Decision:
        table = prefill_table("H100-SXM", "llama-3-8b", 1)
        ttft = table.ttft(query.input_tokens, 0)
        return dataclasses.replace(super().decide(query, now), predicted_ttft_s=ttft)


def test_a_prompt_no_replica_prefills_within_the_slo_is_refused_as_unreachable() -> None:
    service = PlacementService(
        route_path_factory=_PrefillPredicted, slo_gate=SloGate(DEFAULT_CLASSES)
    )
    for i in range(2):
        service.register_replica(replica(i))
    service.install_plan(make_plan())
    config = Settings(environment="production", api_keys=keys())
    client = TestClient(create_app(build_runtime(config, service=service, background=False)))
    huge = {**BODY, "input_tokens": 120_000, "max_output_tokens": 10}
    r = client.post("/v1/route", json=huge, headers=auth(ROUTE_KEY))
    assert r.status_code == 429, r.text
    assert "slo_unreachable" in r.text  # resend it in a class with a longer TTFT SLO
    assert r.headers["Retry-After"] == "1"
    # in the batch class (30 s TTFT SLO) the same prompt is admitted
    r = client.post("/v1/route", json={**huge, "request_class": "batch"}, headers=auth(ROUTE_KEY))
    assert r.status_code == 200, r.text
    # a short prompt is admitted
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.status_code == 200, r.text
