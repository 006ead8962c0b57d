"""The admin API as ``placement serve`` wires it: tenants, credits, classes and keys declared,
changed and removed at run time, persisted in the plan store, reaching admission, the route
path and the next plan; each tenant reads its own usage and nobody else's."""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from placement.solver.capacity import FixedCapacity
from serving.api.runtime import ServiceRuntime
from serving.api.security import hash_key
from serving.api.settings import ApiKey, Settings
from serving.wiring import build_app
from training.telemetry.store import read_requests

FLEET = """\
name: two-pools
replicas:
  - kind: llama
    accelerator: H100-SXM
    count: 2
    model: llama-3-8b
  - kind: qwen
    accelerator: H100-SXM
    count: 1
    model: qwen2.5-32b
    tp: 2
"""
TENANTS = """\
tenants:
  acme: {credit_share: 0.5}
  globex: {credit_share: 0.3}
  initech: {credit_share: 0.1}
"""
ADMIN = "admin-key-0123456789abcdef"
ROUTER = "route-key-0123456789abcdef"
ROUTE_ONLY = "route-only-key-0123456789abcdef"
OPERATOR = {"X-API-Key": ADMIN}


def _app(tmp_path: Path, **settings: Any) -> TestClient:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(TENANTS)
    app = build_app(
        Settings(
            environment="development",
            fleet=fleet,
            tenants_file=tenants,
            plan_dir=tmp_path / "plans",
            solve_time_limit_s=5,
            api_keys=(
                ApiKey(name="ops", digest=hash_key(ADMIN), scopes=("admin",)),
                ApiKey(name="router", digest=hash_key(ROUTER), scopes=("route", "telemetry")),
                ApiKey(name="plain-router", digest=hash_key(ROUTE_ONLY), scopes=("route",)),
            ),
            **settings,
        ),
        solve_executor=ThreadPoolExecutor(1),
        capacity=FixedCapacity({"H100-SXM": 40.0}),
    )
    for state in app.state.runtime.service.replicas.values():
        state.scraped_at = math.inf  # fresh: no scraper runs without the lifespan
    return TestClient(app)


def _runtime(client: TestClient) -> ServiceRuntime:
    rt: ServiceRuntime = client.app.state.runtime  # type: ignore[attr-defined]
    return rt


def _route(client: TestClient, tenant: str, key: str = ROUTER, **body: Any) -> Any:
    payload = {
        "tenant": tenant,
        "model": "llama-3-8b",
        "request_class": "interactive",
        "block_hashes": [hash(tenant) & 0xFFFF, 7],
        "input_tokens": 400,
        "max_output_tokens": 32,
        **body,
    }
    return client.post("/v1/route", json=payload, headers={"X-API-Key": key})


def _admitted_before_refusal(client: TestClient, tenant: str, limit: int = 400) -> int:
    for n in range(limit):
        answer = _route(client, tenant)
        if answer.status_code == 429:
            assert "over_credit" in answer.json()["detail"]
            return n
        assert answer.status_code == 200, answer.text
    return limit


def _tenants(client: TestClient) -> dict[str, Any]:
    answer = client.get("/v1/admin/tenants", headers=OPERATOR)
    assert answer.status_code == 200, answer.text
    return {t["name"]: t for t in answer.json()["tenants"]}


def test_tenants_are_created_updated_deleted_and_survive_a_restart(tmp_path: Path) -> None:
    client = _app(tmp_path)
    assert {n: t["credit_share"] for n, t in _tenants(client).items()} == {
        "acme": 0.5,
        "globex": 0.3,
        "initech": 0.1,
    }
    created = client.post(
        "/v1/admin/tenants",
        json={
            "name": "umbrella",
            "credit_gpu_seconds": 1440,
            "window_s": 3600,
            "burst_cap": 0.5,
            "models": ["llama-3-8b"],
        },
        headers=OPERATOR,
    )
    assert created.status_code == 201, created.text
    # 1,440 GPU-seconds an hour of a 4-GPU fleet: a tenth of it
    assert _tenants(client)["umbrella"]["credit_share"] == pytest.approx(0.1)
    again = client.post("/v1/admin/tenants", json={"name": "umbrella"}, headers=OPERATOR)
    assert again.status_code == 409
    too_much = client.put("/v1/admin/tenants/acme", json={"credit_share": 0.9}, headers=OPERATOR)
    assert too_much.status_code == 409 and "sum to" in too_much.json()["detail"]
    assert (
        client.put(
            "/v1/admin/tenants/nobody", json={"credit_share": 0.1}, headers=OPERATOR
        ).status_code
        == 404
    )
    assert (
        client.put(
            "/v1/admin/tenants/acme", json={"credit_share": 0.4, "weight": 2}, headers=OPERATOR
        ).status_code
        == 200
    )
    assert client.delete("/v1/admin/tenants/globex", headers=OPERATOR).status_code == 204
    assert client.delete("/v1/admin/tenants/globex", headers=OPERATOR).status_code == 404
    batch = {"priority": 2, "ttft_slo_s": 60, "tpot_slo_s": 0.5, "sheddable": True}
    assert client.put("/v1/admin/classes/bulk", json=batch, headers=OPERATOR).status_code == 200
    assert _route(client, "acme", request_class="bulk").status_code == 200
    # the route key may not administer
    assert client.get("/v1/admin/tenants", headers={"X-API-Key": ROUTER}).status_code == 403

    restarted = _app(tmp_path)  # the same plan store: the edits come back, not the file's
    tenants = _tenants(restarted)
    assert set(tenants) == {"acme", "initech", "umbrella"}
    assert tenants["acme"]["credit_share"] == 0.4 and tenants["acme"]["weight"] == 2
    assert tenants["umbrella"]["models"] == ["llama-3-8b"]
    assert "bulk" in _runtime(restarted).service.classes


def test_a_tenant_may_use_only_its_models(tmp_path: Path) -> None:
    client = _app(tmp_path)
    assert _route(client, "initech", model="qwen2.5-32b").status_code == 200
    answer = client.put(
        "/v1/admin/tenants/initech",
        json={"credit_share": 0.1, "models": ["llama-3-8b"]},
        headers=OPERATOR,
    )
    assert answer.status_code == 200
    refused = _route(client, "initech", model="qwen2.5-32b")
    assert refused.status_code == 403 and "may not use model" in refused.json()["detail"]
    assert _route(client, "initech").status_code == 200


def test_a_credit_changed_through_the_api_reaches_admission_and_the_next_plan(
    tmp_path: Path,
) -> None:
    client = _app(tmp_path)
    rt = _runtime(client)
    # acme and globex are active (a request each in flight): initech may borrow only what
    # their unused entitlements leave free
    assert _route(client, "acme").status_code == 200
    assert _route(client, "globex").status_code == 200
    before = _admitted_before_refusal(client, "initech")
    answer = client.put("/v1/admin/tenants/initech", json={"credit_share": 0.6}, headers=OPERATOR)
    assert answer.status_code == 409  # 0.5 + 0.3 + 0.6 > 1: refused whole, nothing changed
    assert rt.service.admission.credit_share("initech") == pytest.approx(0.1)
    for name, share in (("acme", 0.2), ("globex", 0.1), ("initech", 0.6)):
        answer = client.put(
            f"/v1/admin/tenants/{name}", json={"credit_share": share}, headers=OPERATOR
        )
        assert answer.status_code == 200, answer.text
    after = _admitted_before_refusal(client, "initech")
    fleet = rt.service.admission.fleet_in_flight
    # entitlements: 0.1 → 0.6 of the fleet's in-flight budget, others' claims shrank
    assert before < 0.3 * fleet < after, (before, after, fleet)

    solved = client.post("/v1/plan:solve", headers=OPERATOR)
    assert solved.status_code == 200 and solved.json()["outcome"] == "installed", solved.text
    plan = client.get("/v1/plan", headers=OPERATOR).json()
    shares = {t["tenant"]: t["guaranteed_share"] for t in plan["tenants"]}
    assert shares == pytest.approx({"acme": 0.2, "globex": 0.1, "initech": 0.6})
    attainment = {t["tenant"]: t["predicted_attainment"] for t in plan["tenants"]}
    assert attainment["initech"] is not None and 0 < attainment["initech"] <= 1


def test_each_tenant_reads_its_own_usage_and_operators_read_everyones(tmp_path: Path) -> None:
    client = _app(tmp_path, telemetry_dir=tmp_path / "telemetry")
    keys = {}
    for tenant in ("acme", "globex"):
        made = client.post(
            f"/v1/admin/tenants/{tenant}/keys",
            json={"name": f"{tenant}-app", "scopes": ["route"]},
            headers=OPERATOR,
        )
        assert made.status_code == 201, made.text
        keys[tenant] = made.json()["key"]
    assert _route(client, "globex", key=keys["acme"]).status_code == 403  # not its tenant
    decisions = [_route(client, "acme", key=keys["acme"]).json()["decision_id"] for _ in range(3)]
    outcomes = [
        {"decision_id": decisions[0], "ttft_s": 0.2, "output_tokens": 32},
        {"decision_id": decisions[1], "ttft_s": 5.0, "output_tokens": 32},  # TTFT SLO is 2 s
        {"decision_id": decisions[2], "output_tokens": 0, "error": "reset"},
    ]
    reported = client.post(
        "/v1/outcomes", json={"outcomes": outcomes}, headers={"X-API-Key": keys["acme"]}
    )
    assert reported.json() == {"accepted": 3, "unknown": []}
    _route(client, "globex", key=keys["globex"])

    own = client.get("/v1/usage", headers={"X-API-Key": keys["acme"]}).json()
    assert [u["tenant"] for u in own] == ["acme"]
    acme = own[0]
    assert (acme["requests"], acme["completed"], acme["failed"]) == (3, 2, 1)
    assert (acme["slo_judged"], acme["slo_met"]) == (2, 1)
    assert acme["slo_attainment"] == 0.5 and acme["credit_share"] == 0.5
    assert acme["charged_tokens"] == 3 * 400 + 2 * 64 and 0 < acme["share_used"] < 1
    assert acme["goodput_rps"] > 0
    for path in ("/v1/usage/globex", "/v1/usage/initech"):
        assert client.get(path, headers={"X-API-Key": keys["acme"]}).status_code == 403
    everyone = client.get("/v1/usage", headers=OPERATOR).json()
    assert {u["tenant"] for u in everyone} == {"acme", "globex", "initech"}
    assert client.get("/v1/usage/globex", headers=OPERATOR).json()["requests"] == 1
    # a fleet-wide router is not an operator
    assert client.get("/v1/usage", headers={"X-API-Key": ROUTE_ONLY}).status_code == 403

    # a removed tenant's keys stop working at once
    assert client.delete("/v1/admin/tenants/globex", headers=OPERATOR).status_code == 204
    assert _route(client, "globex", key=keys["globex"]).status_code == 401

    # the reported outcomes are rows of the telemetry store
    sink = _runtime(client).telemetry
    assert sink is not None
    asyncio.run(sink.flush())
    rows = read_requests(tmp_path / "telemetry")
    assert len(rows) == 3 and set(rows["tenant"]) == {"acme"}
    assert sorted(rows["error"]) == ["", "", "reset"]
    assert rows["ttft_s"].dropna().tolist() == pytest.approx([0.2, 5.0], abs=1e-6)
