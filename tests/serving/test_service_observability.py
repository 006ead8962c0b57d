"""What operators read of the service: per-tenant credit and SLO metrics, the installed plan's
solver report, recent refusals and SLO attainment over time (serving.activity)."""

from __future__ import annotations

import pytest
from one_replica import one_h100
from prometheus_client import generate_latest

from placement.domain.requests import Tenant
from serving.activity import BUCKET_S, Activity
from serving.route import NoReplica, PlacementRoutePath, RouteQuery
from serving.service import PlacementService


def _service() -> PlacementService:
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values())),
        tenants={
            "acme": Tenant(name="acme", credit_share=0.5),
            "globex": Tenant(name="globex", credit_share=0.25),
        },
        in_flight_per_replica=8,
        no_plan_fallback=True,
    )
    service.register_replica(one_h100())
    return service


def _query(tenant: str, model: str = "llama-3-8b") -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model=model,
        request_class="interactive",
        block_hashes=(1,),
        input_tokens=100,
        max_output_tokens=10,
    )


def _metric(text: str, prefix: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, lines)
    return float(lines[0].rsplit(" ", 1)[1])


def test_tenant_credit_use_and_slo_attainment_are_metrics() -> None:
    service = _service()
    held = [service.route(_query("acme")) for _ in range(3)]
    done = [service.route(_query("globex")) for _ in range(2)]
    service.route(_query("mallory"))  # undeclared: counted under "other"
    service.complete(done[0].decision_id, output_tokens=5, ok=True, ttft_s=0.5)  # met (2 s)
    service.complete(done[1].decision_id, output_tokens=5, ok=True, ttft_s=9.0)  # missed
    text = generate_latest(service.metrics.registry).decode()
    assert _metric(text, 'placement_tenant_credit_share{tenant="acme"}') == 0.5
    assert _metric(text, 'placement_tenant_in_flight{tenant="acme"}') == len(held)
    entitled = _metric(text, 'placement_tenant_entitlement{tenant="acme"}')
    assert entitled == service.admission.entitlement("acme") == 4  # half of 8 in flight
    assert _metric(text, 'placement_tenant_credit_used{tenant="acme"}') == 3 / 4
    assert _metric(text, 'placement_tenant_slo_attainment{tenant="globex"}') == 0.5
    assert _metric(text, 'placement_tenant_in_flight{tenant="other"}') == 1
    assert "mallory" not in text
    met = 'placement_slo_outcomes_total{request_class="interactive",result="met",tenant="globex"}'
    assert _metric(text, met) == 1
    assert _metric(text, "placement_plan_solver_seconds") == -1.0  # no plan yet


def test_refusals_are_recorded_newest_first() -> None:
    service = _service()
    with pytest.raises(NoReplica):
        service.route(_query("acme", model="llama-2-70b"))
    refusals = service.activity.recent_refusals()
    assert [(r["tenant"], r["reason"]) for r in refusals] == [("acme", "no_replica")]
    text = generate_latest(service.metrics.registry).decode()
    assert _metric(text, 'placement_refusals_total{reason="no_replica"}') == 1


def test_attainment_over_time_by_bucket() -> None:
    now = [1_000.0]
    activity = Activity(clock=lambda: now[0])
    activity.outcome("acme", met=True)
    activity.outcome("acme", met=False)
    now[0] += BUCKET_S
    activity.outcome("acme", met=False)
    activity.outcome("globex", met=True)
    activity.outcome("globex", met=True)
    history = activity.history()
    assert [h["at"] for h in history] == [1_000.0, 1_000.0 + BUCKET_S]
    assert [h["outcomes"] for h in history] == [2, 3]
    assert [h["attainment"] for h in history] == [0.5, pytest.approx(2 / 3)]
    assert activity.attainment() == {"acme": pytest.approx(1 / 3), "globex": 1.0}
