from __future__ import annotations

import pytest
from api_fakes import ACME_KEY, ADMIN_KEY, ROUTE_KEY, TELEMETRY_KEY, auth, make_plan, make_runtime
from fastapi.testclient import TestClient

from placement.domain.prefix import hash_text
from serving.api.main import create_app


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(make_runtime(plan=make_plan(3))))


BODY = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 100, "max_output_tokens": 50}


def test_route_answers_replica_reason_version_and_headers(client: TestClient) -> None:
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["replica_id"] == "h100-0"
    assert body["address"] == "10.0.0.1:8000"
    assert body["reason"] == "plan"
    assert body["plan_version"] == 3
    assert body["fallbacks"] == [{"replica_id": "h100-1", "address": "10.0.0.2:8000"}]
    assert r.headers["x-gateway-destination-endpoint"] == "10.0.0.1:8000,10.0.0.2:8000"
    assert r.headers["x-placement-reason"] == "plan"
    assert r.headers["x-placement-decision-id"] == body["decision_id"]


def test_route_answers_no_priority_for_fcfs_replicas(client: TestClient) -> None:
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert "priority" not in r.json()
    assert "x-placement-priority" not in r.headers


def test_route_answers_the_engine_priority_by_class() -> None:
    client = TestClient(create_app(make_runtime(plan=make_plan(3), engine_priority="class")))
    got = {}
    for request_class in ("interactive", "batch"):
        body = {**BODY, "request_class": request_class}
        r = client.post("/v1/route", json=body, headers=auth(ROUTE_KEY))
        assert r.status_code == 200, r.text
        got[request_class] = r.json()["priority"]
        assert r.headers["x-placement-priority"] == str(got[request_class])
    # interactive requests are sent ahead of batch ones
    assert got["interactive"] < got["batch"]


def test_route_without_plan_says_fallback() -> None:
    client = TestClient(create_app(make_runtime(no_plan_fallback=True)))
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.json()["reason"] == "fallback:no_plan"
    assert r.json()["plan_version"] is None
    assert r.headers["x-placement-plan-version"] == ""


def test_prompt_is_hashed_server_side() -> None:
    runtime = make_runtime(plan=make_plan(), text_block_chars=16)
    seen = []
    service = runtime.service
    original = service.route

    def spy(query, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(query)
        return original(query, **kwargs)

    service.route = spy  # type: ignore[method-assign]
    client = TestClient(create_app(runtime))
    prompt = "x" * 40 + "y" * 10
    r = client.post(
        "/v1/route",
        json={"tenant": "acme", "model": "llama-3-8b", "prompt": prompt},
        headers=auth(ROUTE_KEY),
    )
    assert r.status_code == 200, r.text
    assert seen[0].block_hashes == hash_text(prompt, 16)
    assert len(seen[0].block_hashes) == 3
    assert seen[0].input_tokens == len(prompt) // 4


def test_unserved_model_is_404(client: TestClient) -> None:
    r = client.post("/v1/route", json={**BODY, "model": "other"}, headers=auth(ROUTE_KEY))
    assert r.status_code == 404
    assert "other" in r.json()["detail"]


@pytest.mark.parametrize(
    "body,needle",
    [
        ({**BODY, "block_hashes": [1], "prompt": "p"}, "not both"),
        ({"tenant": "acme", "model": "llama-3-8b"}, "input_tokens"),
        ({**BODY, "block_hashes": [-1]}, "greater than or equal"),
        ({**BODY, "tenant": ""}, "at least 1"),
        ({**BODY, "surprise": 1}, "Extra inputs"),
    ],
)
def test_invalid_bodies_are_422_with_the_reason(
    client: TestClient, body: dict[str, object], needle: str
) -> None:
    r = client.post("/v1/route", json=body, headers=auth(ROUTE_KEY))
    assert r.status_code == 422
    assert needle in r.text


def test_malformed_json_is_422(client: TestClient) -> None:
    r = client.post("/v1/route", content=b"{not json", headers=auth(ROUTE_KEY))
    assert r.status_code == 422


def test_unknown_request_class_is_422(client: TestClient) -> None:
    r = client.post(
        "/v1/route", json={**BODY, "request_class": "platinum"}, headers=auth(ROUTE_KEY)
    )
    assert r.status_code == 422
    [error] = r.json()["detail"]
    assert error["loc"] == ["body", "request_class"] and "platinum" in error["msg"]


def test_body_over_the_limit_is_413() -> None:
    client = TestClient(create_app(make_runtime(max_body_bytes=2048)))
    r = client.post("/v1/route", json={**BODY, "prompt": "x" * 5000}, headers=auth(ROUTE_KEY))
    assert r.status_code == 413


def test_auth_missing_invalid_wrong_scope_and_tenant(client: TestClient) -> None:
    assert client.post("/v1/route", json=BODY).status_code == 401
    assert client.post("/v1/route", json=BODY, headers=auth("nope")).status_code == 401
    assert client.post("/v1/route", json=BODY, headers=auth(TELEMETRY_KEY)).status_code == 403
    other = {**BODY, "tenant": "globex"}
    assert client.post("/v1/route", json=other, headers=auth(ACME_KEY)).status_code == 403
    assert client.post("/v1/route", json=BODY, headers=auth(ACME_KEY)).status_code == 200
    assert client.post("/v1/route", json=BODY, headers={"X-API-Key": ADMIN_KEY}).status_code == 200


def test_batch_gives_each_item_its_status(client: TestClient) -> None:
    r = client.post(
        "/v1/route:batch",
        json={"requests": [BODY, {**BODY, "model": "other"}]},
        headers=auth(ROUTE_KEY),
    )
    assert r.status_code == 200, r.text
    statuses = [item["status"] for item in r.json()["results"]]
    assert statuses == [200, 404]
    assert r.json()["results"][0]["decision"]["replica_id"] == "h100-0"


def test_batch_naming_an_unserved_class_is_refused_whole(client: TestClient) -> None:
    r = client.post(
        "/v1/route:batch",
        json={"requests": [BODY, {**BODY, "request_class": "x"}]},
        headers=auth(ROUTE_KEY),
    )
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "requests", 1, "request_class"]]


def test_batch_refuses_another_tenant_for_a_tenant_key(client: TestClient) -> None:
    r = client.post(
        "/v1/route:batch",
        json={"requests": [BODY, {**BODY, "tenant": "globex"}]},
        headers=auth(ACME_KEY),
    )
    assert r.status_code == 403


def test_outcomes_release_the_lease_and_charge_the_decode() -> None:
    runtime = make_runtime(plan=make_plan())
    client = TestClient(create_app(runtime))
    decision = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY)).json()
    vtc = runtime.service.admission.vtc
    before = vtc.counters["acme"]
    assert runtime.service.admission.in_flight == 1
    r = client.post(
        "/v1/outcomes",
        json={
            "outcomes": [
                {"decision_id": decision["decision_id"], "ttft_s": 0.2, "output_tokens": 40},
                {"decision_id": "nope", "output_tokens": 1},
            ]
        },
        headers=auth(TELEMETRY_KEY),
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 1, "unknown": ["nope"]}
    assert runtime.service.admission.in_flight == 0
    assert runtime.service.replicas["h100-0"].in_flight == 0
    # the decode's GPU-seconds on the fleet's average replica, over acme's credit weight 0.5
    rates = runtime.service.admission.rates
    assert rates is not None
    assert vtc.counters["acme"] == pytest.approx(before + rates.decode(100, 40) / 0.5)


def test_tenant_key_cannot_settle_another_tenants_decision() -> None:
    runtime = make_runtime(plan=make_plan())
    client = TestClient(create_app(runtime))
    decision = client.post(
        "/v1/route", json={**BODY, "tenant": "globex"}, headers=auth(ROUTE_KEY)
    ).json()
    r = client.post(
        "/v1/outcomes",
        json={"outcomes": [{"decision_id": decision["decision_id"], "output_tokens": 1}]},
        headers=auth(ACME_KEY),
    )
    assert r.json() == {"accepted": 0, "unknown": [decision["decision_id"]]}
    assert runtime.service.admission.in_flight == 1


def test_admission_refusal_is_429_with_retry_after() -> None:
    runtime = make_runtime(replicas=1, plan=make_plan(), in_flight_per_replica=2)
    client = TestClient(create_app(runtime))
    batch = {**BODY, "request_class": "batch"}
    codes = [
        client.post("/v1/route", json=batch, headers=auth(ROUTE_KEY)).status_code for _ in range(3)
    ]
    assert codes[0] == 200
    assert codes[-1] == 429
    r = client.post("/v1/route", json=batch, headers=auth(ROUTE_KEY))
    assert int(r.headers["Retry-After"]) >= 1
    # the interactive class is not shed while batch work is in flight
    assert client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY)).status_code == 200
    metrics = client.get("/metrics").text
    assert 'placement_shed_total{request_class="batch",tenant="acme"}' in metrics


def test_slo_gate_refuses_a_request_predicted_to_miss_its_ttft() -> None:
    from placement.domain.requests import DEFAULT_CLASSES
    from serving.admission.slo_gate import SloGate

    # the fake route path predicts 50 ms; a headroom of 1% makes the interactive limit 20 ms
    gate = SloGate(DEFAULT_CLASSES, headroom=0.01)
    runtime = make_runtime(plan=make_plan(), slo_gate=gate)
    client = TestClient(create_app(runtime))
    r = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert r.status_code == 429, r.text
    assert int(r.headers["Retry-After"]) >= 1
    assert runtime.service.admission.in_flight == 0  # nothing left counted in flight
    assert 'placement_refusals_total{reason="slo"}' in client.get("/metrics").text
    gate.headroom = 1.0  # 2 s: the same request now fits
    assert client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY)).status_code == 200


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"input_tokens": 9_000_000}, "input_tokens"),
        ({"input_tokens": 131_000, "max_output_tokens": 5_000}, "max_output_tokens"),
    ],
)
def test_a_request_longer_than_the_context_window_is_422_and_never_demand(
    client: TestClient, changes: dict[str, int], field: str
) -> None:
    r = client.post("/v1/route", json={**BODY, **changes}, headers=auth(ROUTE_KEY))
    assert r.status_code == 422, r.text
    assert "context window" in r.text and field in r.text
    # the same tenant's ordinary request is still placed
    ok = client.post("/v1/route", json=BODY, headers=auth(ROUTE_KEY))
    assert ok.status_code == 200
