"""The planner follows the registry's champion without a restart, as ``placement serve`` wires
it: a real MLflow SQLite store in a temporary folder; a service planning from the roofline
prior (no champion yet); a version promoted → the next plan records that version and
capacities from it, ``/metrics``' model-version gauge and ``/healthz`` follow; another version
promoted → the same again."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient
from registry_builders import Registry

from placement.paths import repo_root
from placement.plan.capacity_source import ROOFLINE_SOURCE
from serving.api.security import hash_key
from serving.api.settings import ApiKey, Settings
from serving.wiring import build_app
from training.tracking import CHAMPION, LATENCY_MODEL, THROUGHPUT_MODEL, TRACKING_URI_ENV

FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"
KEY = "admin-key-0123456789abcdef"
HEADERS = {"X-API-Key": KEY}
GAUGE = f'placement_model_version{{alias="{CHAMPION}"}}'
RELOAD_TIMEOUT_S = 90.0


@pytest.fixture
def registry(
    champion_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> MlflowClient:
    """A copy of the session's registry (version 1 of each model) with no champion yet."""
    database = tmp_path / "mlflow.db"
    shutil.copy(champion_registry.uri.removeprefix("sqlite:///"), database)
    uri = f"sqlite:///{database}"
    monkeypatch.setenv(TRACKING_URI_ENV, uri)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    for model in (LATENCY_MODEL, THROUGHPUT_MODEL):
        client.delete_registered_model_alias(model, CHAMPION)
    return client


@pytest.fixture
def service(registry: MlflowClient, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        environment="development",
        api_keys=(ApiKey(name="ops", digest=hash_key(KEY), scopes=("admin", "route")),),
        fleet=FLEET,
        plan_dir=tmp_path / "plans",
        solve_period_s=3600,  # only the champion watch and the test ask for solves
        solve_time_limit_s=5,
        scrape_interval_s=3600,  # no replica is scraped (none runs): keep them healthy
        champion_poll_s=0.2,
    )
    app = build_app(settings, solve_executor=ThreadPoolExecutor(1))
    for state in app.state.runtime.service.replicas.values():
        state.scraped_at = math.inf  # fresh
    with TestClient(app) as client:
        yield client


def _plan(client: TestClient) -> dict[str, Any]:
    answer = client.get("/v1/plan", headers=HEADERS)
    assert answer.status_code == 200, answer.text
    plan: dict[str, Any] = answer.json()
    return plan


def _gauge(client: TestClient) -> float:
    lines = [ln for ln in client.get("/metrics").text.splitlines() if ln.startswith(GAUGE)]
    assert len(lines) == 1
    return float(lines[0].split()[-1])


def _capacities(plan: dict[str, Any]) -> dict[str, float]:
    return {r["id"]: r["load_cap_rps"] for r in plan["replicas"]}


def _wait_for_source(client: TestClient, source: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    while time.monotonic() - started < RELOAD_TIMEOUT_S:
        answer = client.get("/v1/plan", headers=HEADERS)
        if answer.status_code == 200 and answer.json()["capacity_source"] == source:
            return answer.json(), time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"no plan from {source} within {RELOAD_TIMEOUT_S} s: {_plan(client)}")


def _promote(client: MlflowClient, version: str) -> None:
    client.set_registered_model_alias(LATENCY_MODEL, CHAMPION, version)


def test_a_promoted_champion_reaches_the_next_plan_without_a_restart(
    service: TestClient, registry: MlflowClient
) -> None:
    for i in range(40):  # demand for the planner: two tenants, a few prefixes
        body = {
            "tenant": f"t{i % 2}",
            "model": "llama-3-8b",
            "request_class": "interactive",
            "block_hashes": [i % 5 + 1, 100 + i],
            "input_tokens": 2000,
            "max_output_tokens": 200,
        }
        assert service.post("/v1/route", json=body, headers=HEADERS).status_code == 200
    solved = service.post("/v1/plan:solve", headers=HEADERS)
    assert solved.json()["outcome"] == "installed", solved.text
    prior = _plan(service)
    assert prior["capacity_source"] == ROOFLINE_SOURCE
    assert _gauge(service) == 0
    health = service.get("/healthz").json()
    assert "roofline prior" in health["capacity"] and "no champion" in health["capacity"]

    _promote(registry, "1")
    first, _ = _wait_for_source(service, f"models:/{LATENCY_MODEL}/1 (@{CHAMPION})")
    assert first["version"] > prior["version"]
    assert _capacities(first) != _capacities(prior)  # capacities from the model, not the prior
    assert _gauge(service) == 1
    assert f"models:/{LATENCY_MODEL}/1" in service.get("/healthz").json()["capacity"]

    # a second version (the same predictor registered again) promoted: followed too
    v1 = registry.get_model_version(LATENCY_MODEL, "1")
    v2 = registry.create_model_version(LATENCY_MODEL, v1.source, run_id=v1.run_id)
    _promote(registry, str(v2.version))
    second, _ = _wait_for_source(service, f"models:/{LATENCY_MODEL}/{v2.version} (@{CHAMPION})")
    assert second["version"] > first["version"]
    assert _capacities(second) == pytest.approx(_capacities(first))  # the same predictor
    assert _gauge(service) == float(v2.version)
