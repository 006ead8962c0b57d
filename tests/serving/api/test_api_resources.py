from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from api_fakes import ACME_KEY, ADMIN_KEY, ROUTE_KEY, TELEMETRY_KEY, auth, make_plan, make_runtime
from fastapi.testclient import TestClient

from placement.plan import Plan
from serving.api.main import create_app
from serving.plan_store import DirectoryPlanStore
from serving.planner import Planner

REPLICA = {
    "id": "l40s-0",
    "address": "10.0.1.1:8000",
    "model": "llama-3-8b",
    "accelerator": "L40S",
    "kv_capacity_tokens": 100_000,
}


def solve(instance: Any, *, previous: Plan | None, time_limit_s: float, version: int) -> Plan:
    return make_plan(version, objective=2.0)


def whatif(scenario: dict[str, Any]) -> dict[str, Any]:
    return {"cost_per_hour": 10.0 * sum(scenario["replicas"].values())}


def planner(tmp_path: Path, install: Any = lambda plan: None) -> Planner:
    return Planner(
        solve=solve,
        snapshot=lambda: None,
        store=DirectoryPlanStore(tmp_path),
        install=install,
        executor=ThreadPoolExecutor(1),
    )


def test_health_and_readiness() -> None:
    client = TestClient(create_app(make_runtime()))
    assert client.get("/healthz").json() == {
        "status": "ok",
        "detail": "",
        "capacity": "no plan yet",
    }
    from_prior = TestClient(create_app(make_runtime(plan=make_plan(2)))).get("/healthz").json()
    assert from_prior["capacity"].startswith("plan 2: capacities from the roofline prior")
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["detail"] == "no plan yet"
    ready = TestClient(create_app(make_runtime(no_plan_fallback=True))).get("/readyz")
    assert ready.status_code == 200 and "fallback" in ready.json()["detail"]
    assert TestClient(create_app(make_runtime(plan=make_plan(2)))).get("/readyz").status_code == 200


def test_metrics_expose_decisions_latency_and_plan_age() -> None:
    client = TestClient(create_app(make_runtime(plan=make_plan(2))))
    body = {"tenant": "a", "model": "llama-3-8b", "input_tokens": 1}
    client.post("/v1/route", json=body, headers=auth(ROUTE_KEY))
    text = client.get("/metrics").text
    assert 'placement_decisions_total{reason="plan"} 1.0' in text
    assert "placement_decision_latency_seconds_count 1.0" in text
    assert "placement_plan_version 2.0" in text
    age = [ln for ln in text.splitlines() if ln.startswith("placement_plan_age_seconds ")]
    assert 0 <= float(age[0].split()[1]) < 60


def test_replica_registration_lifecycle() -> None:
    runtime = make_runtime(replicas=0)
    client = TestClient(create_app(runtime))
    r = client.post("/v1/replicas", json=REPLICA, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    assert r.json()["metrics_url"] == "http://10.0.1.1:8000/metrics"
    assert client.post("/v1/replicas", json=REPLICA, headers=auth(ADMIN_KEY)).status_code == 200
    listed = client.get("/v1/replicas", headers=auth(TELEMETRY_KEY)).json()
    assert [x["id"] for x in listed] == ["l40s-0"]
    route = {"tenant": "a", "model": "llama-3-8b", "input_tokens": 1}
    assert client.post("/v1/route", json=route, headers=auth(ROUTE_KEY)).json()["replica_id"] == (
        "l40s-0"
    )
    assert client.delete("/v1/replicas/l40s-0", headers=auth(ADMIN_KEY)).status_code == 204
    assert client.delete("/v1/replicas/l40s-0", headers=auth(ADMIN_KEY)).status_code == 404
    # its last replica gone, the model is no longer served (404, not a transient 503)
    assert client.post("/v1/route", json=route, headers=auth(ROUTE_KEY)).status_code == 404


def test_replica_endpoints_need_admin_and_refuse_unknown_accelerators() -> None:
    client = TestClient(create_app(make_runtime()))
    assert client.post("/v1/replicas", json=REPLICA).status_code == 401
    assert client.post("/v1/replicas", json=REPLICA, headers=auth(ROUTE_KEY)).status_code == 403
    assert client.get("/v1/replicas", headers=auth(ACME_KEY)).status_code == 403
    bad = {**REPLICA, "accelerator": "TPU-v9"}
    r = client.post("/v1/replicas", json=bad, headers=auth(ADMIN_KEY))
    assert r.status_code == 422 and "TPU-v9" in r.text


def test_plan_endpoints(tmp_path: Path) -> None:
    services: list[Any] = []
    runtime = make_runtime(planner=planner(tmp_path, lambda p: services[0].install_plan(p)))  # noqa: PLW0108
    services.append(runtime.service)
    client = TestClient(create_app(runtime))
    assert client.get("/v1/plan", headers=auth(ROUTE_KEY)).status_code == 404
    assert client.post("/v1/plan:solve", headers=auth(ROUTE_KEY)).status_code == 403
    assert client.get("/v1/plan", headers=auth(ACME_KEY)).status_code == 403
    r = client.post("/v1/plan:solve", headers=auth(ADMIN_KEY))
    assert r.status_code == 200 and r.json()["outcome"] == "installed", r.text
    version = r.json()["version"]
    assert client.get("/v1/plan", headers=auth(ROUTE_KEY)).json()["version"] == version
    assert client.get(f"/v1/plans/{version}", headers=auth(ADMIN_KEY)).status_code == 200
    assert client.get("/v1/plans/999", headers=auth(ADMIN_KEY)).status_code == 404
    assert client.get("/v1/plans/abc", headers=auth(ADMIN_KEY)).status_code == 422


def test_solve_without_a_planner_is_409() -> None:
    client = TestClient(create_app(make_runtime()))
    assert client.post("/v1/plan:solve", headers=auth(ADMIN_KEY)).status_code == 409
    assert client.post("/v1/whatif", json={}, headers=auth(ADMIN_KEY)).status_code == 409


def test_whatif_runs_as_a_job() -> None:
    runtime = make_runtime()
    runtime.whatif = whatif
    with TestClient(create_app(runtime)) as client:
        assert client.post("/v1/whatif", json={}, headers=auth(ROUTE_KEY)).status_code == 403
        r = client.post("/v1/whatif", json={"replicas": {"h100": 3}}, headers=auth(ADMIN_KEY))
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        for _ in range(200):
            job = client.get(f"/v1/jobs/{job_id}", headers=auth(ADMIN_KEY)).json()
            if job["status"] in ("done", "failed"):
                break
            time.sleep(0.01)
        assert job["status"] == "done"
        assert job["result"] == {"cost_per_hour": 30.0}
        assert client.get("/v1/jobs/none", headers=auth(ADMIN_KEY)).status_code == 404
        bad = client.post("/v1/whatif", json={"replicas": {"h100": -1}}, headers=auth(ADMIN_KEY))
        assert bad.status_code == 422


def test_openapi_docs_are_served() -> None:
    client = TestClient(create_app(make_runtime()))
    spec = client.get("/openapi.json").json()
    assert {"/v1/route", "/v1/route:batch", "/v1/outcomes", "/v1/plan:solve"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_restart_resumes_plan_and_credits(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    store.put(make_plan(7))
    store.save_credits({"acme": 5.0, "globex": 0.0})
    runtime = make_runtime(planner=planner(tmp_path))
    # the fake planner's install is a no-op; resume reports what it found
    assert runtime.planner is not None and runtime.planner.current is not None
    assert runtime.planner.current.version == 7
    assert runtime.service.admission.vtc.counters == {"acme": 5.0, "globex": 0.0}
