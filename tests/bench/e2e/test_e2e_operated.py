"""Our routers as an operator runs them: the settings the service reads, the tenants file it
loads, the headers its requests carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.e2e.operated import SCORED_PROFILE, TENANT, Operated, objective_headers
from placement.domain.requests import DEFAULT_CLASSES, RequestClass
from placement.domain.tenancy import load_tenancy
from serving.api.security import KeyRing, hash_key
from serving.api.settings import ApiKey, load_settings
from serving.gateway.headers import request_meta

STRICT = RequestClass(name="strict", priority=0, ttft_slo_s=0.5, tpot_slo_s=0.05, sheddable=False)


def test_the_service_reads_the_planner_the_gate_and_the_tenants_from_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = Operated(solve_period_s=7.0, slo_gate_headroom=2.5)
    for name, value in ours.env(tmp_path, STRICT).items():
        monkeypatch.setenv(name, value)
    settings = load_settings(environment="development")
    assert settings.planner and settings.slo_gate
    assert settings.solve_period_s == 7.0 and settings.slo_gate_headroom == 2.5
    assert settings.profile == SCORED_PROFILE and settings.profile.exists()
    assert settings.tenants_file is not None
    tenancy = load_tenancy(settings.tenants_file)
    assert {name: t.credit_share for name, t in tenancy.tenants.items()} == {TENANT: 1.0}
    assert tenancy.classes["strict"] == STRICT  # the SLOs the benchmark scores


def test_greedy_turns_the_planner_and_the_gate_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    greedy = Operated(planner=False, slo_gate=False, profile=None)
    env = greedy.env(tmp_path, DEFAULT_CLASSES["interactive"])
    assert "PLACEMENT_PROFILE" not in env
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(environment="development")
    assert not settings.planner and not settings.slo_gate
    assert greedy.label == "no plan, no gate"
    assert Operated().label.startswith("planner every 15 s, SLO gate, headroom 1")


def test_the_gateway_reads_the_tenant_and_class_from_the_headers_sent() -> None:
    keys = KeyRing([ApiKey(name="bench", digest=hash_key("k"), scopes=("route",))])
    headers = {**objective_headers(STRICT), "authorization": "Bearer k"}
    meta = request_meta(
        headers, keys, tenant_header="x-gateway-inference-fairness-id", default_class="other"
    )
    assert (meta.tenant, meta.request_class) == (TENANT, "strict")
