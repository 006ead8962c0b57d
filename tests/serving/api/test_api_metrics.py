"""``/metrics``: open by default; behind a ``metrics`` (or ``admin``) key when
``PLACEMENT_METRICS_AUTH`` is set, refusing in the Problem schema; and bounded in size
whatever tenant names clients send."""

from __future__ import annotations

from api_fakes import (
    ACME_KEY,
    ADMIN_KEY,
    METRICS_KEY,
    ROUTE_KEY,
    auth,
    make_plan,
    make_runtime,
)
from fastapi.testclient import TestClient

from serving.api.main import create_app
from serving.api.settings import Settings


def _client(**settings: object) -> TestClient:
    return TestClient(create_app(make_runtime(plan=make_plan(), **settings)))


def test_metrics_are_open_unless_configured() -> None:
    assert _client().get("/metrics").status_code == 200


def test_metrics_behind_a_key_refuse_in_the_problem_schema() -> None:
    client = _client(metrics_auth=True)
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing.json() == {"detail": "missing API key"}
    assert client.get("/metrics", headers=auth("wrong-key-0123456789")).status_code == 401
    lacking = client.get("/metrics", headers=auth(ROUTE_KEY))
    assert lacking.status_code == 403 and "metrics" in lacking.json()["detail"]
    assert client.get("/metrics", headers=auth(ACME_KEY)).status_code == 403  # one tenant's
    for key in (METRICS_KEY, ADMIN_KEY):
        r = client.get("/metrics", headers=auth(key))
        assert r.status_code == 200 and "placement_decisions_total" in r.text


def test_the_setting_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("PLACEMENT_METRICS_AUTH", "1")
    assert Settings(environment="development").metrics_auth is True


def test_refusals_of_many_unknown_tenants_keep_metrics_small() -> None:
    runtime = make_runtime(replicas=1, plan=make_plan(), in_flight_per_replica=2)
    client = TestClient(create_app(runtime))
    before = len(client.get("/metrics").content)
    item = {"model": "llama-3-8b", "input_tokens": 8, "request_class": "batch"}
    statuses = []
    for start in (0, 250):
        batch = [{**item, "tenant": f"t{i}"} for i in range(start, start + 250)]
        r = client.post("/v1/route:batch", json={"requests": batch}, headers=auth(ROUTE_KEY))
        statuses += [result["status"] for result in r.json()["results"]]
    assert statuses.count(429) > 490
    text = client.get("/metrics").text
    assert len(text) < before + 2_000
    assert 'placement_shed_total{request_class="batch",tenant="other"}' in text
    assert 'tenant="t5' not in text
