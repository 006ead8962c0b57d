"""A request waiting in a flow-control queue is tried again many times a second: a refused
try is not another refusal (in the metrics, the tenant's usage or the SLO gate's counts);
the first try of each request is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "api"))
from api_fakes import FakeRoutePath, make_plan, replica

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import SloGate
from serving.route.types import RouteQuery
from serving.service import PlacementService, Refused

QUERY = RouteQuery(
    tenant="acme",
    model="llama-3-8b",
    request_class="interactive",
    block_hashes=(),
    input_tokens=100,
    max_output_tokens=50,
)


def _refusing_service() -> PlacementService:
    gate = SloGate(DEFAULT_CLASSES)
    for replica_id in ("h100-0", "h100-1"):  # prefill 70× slower than predicted: 3.5 s
        for _ in range(200):
            gate.calibration.observe(replica_id, 1.0, 70.0)
    service = PlacementService(route_path_factory=FakeRoutePath, slo_gate=gate)
    for i in range(2):
        service.register_replica(replica(i))
    service.install_plan(make_plan())
    return service


def _refusals(service: PlacementService) -> float:
    return sum(
        s.value
        for m in service.metrics.refusals.collect()
        for s in m.samples
        if s.name.endswith("_total")
    )


def test_a_refused_retry_counts_nowhere_but_the_first_try_does() -> None:
    service = _refusing_service()
    gate = service.slo_gate
    assert gate is not None
    with pytest.raises(Refused):
        service.route(QUERY)
    assert _refusals(service) == 1
    assert service.usage.view("acme", credit_share=0.0).refused == 1
    for _ in range(50):
        with pytest.raises(Refused) as refused:
            service.route(QUERY, retry=True)
        assert refused.value.reason == "slo"  # the answer is the same; only the count differs
    assert _refusals(service) == 1
    assert service.usage.view("acme", credit_share=0.0).refused == 1
    assert gate.refused[("acme", "interactive")] == 1
