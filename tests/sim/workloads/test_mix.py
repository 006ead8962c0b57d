"""Mixing tenants from their sources, loaded by the caller: thinning, classes, names checked."""

from __future__ import annotations

import pytest

from placement.domain.requests import Request
from placement.domain.tenancy import tenancy_from_dict
from placement.errors import InputError
from sim.workloads.base import Workload
from sim.workloads.mix import mix_tenants


def _source(name: str, n: int) -> Workload:
    return Workload(
        name=name,
        requests=[Request(i, float(i), 100 + i, 10) for i in range(n)],
        tenants={},
    )


SOURCES = {"fast": 40, "slow": 10}


def _load(name: str, seed: int, span: float) -> Workload:
    return _source(name, SOURCES[name]).window(0.0, span)


def _tenancy(**classes: str) -> dict[str, object]:
    return {
        "classes": {"gold": {"priority": 0, "ttft_slo_s": 0.5, "tpot_slo_s": 0.04}},
        "tenants": {
            "a": {"source": "fast", "traffic_share": 0.5, **classes},
            "b": {"source": "slow", "traffic_share": 0.5},
        },
    }


def test_each_tenant_sends_its_source_in_its_class_thinned_to_the_shares() -> None:
    tenancy = tenancy_from_dict(_tenancy(request_class="gold"))
    w = mix_tenants(tenancy, _load, SOURCES, name="m", seed=1, duration_s=100.0)
    by = {t: [r for r in w.requests if r.tenant == t] for t in ("a", "b")}
    assert len(by["a"]) == len(by["b"]) == 10  # the smaller source sets the count
    assert {r.request_class for r in by["a"]} == {"gold"}
    assert {r.request_class for r in by["b"]} == {"interactive"}  # its source's own class
    assert w.classes["gold"].ttft_slo_s == 0.5
    assert [r.arrival_s for r in w.requests] == sorted(r.arrival_s for r in w.requests)


def test_a_source_the_loader_does_not_know_names_the_field() -> None:
    tenancy = tenancy_from_dict(_tenancy())
    with pytest.raises(InputError) as err:
        mix_tenants(tenancy, _load, ("fast",), name="m", duration_s=100.0)
    assert err.value.field == "tenants.b.source"
