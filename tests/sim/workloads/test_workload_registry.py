"""Workloads by name: the catalogue, the errors, and (with the shared data) every entry."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from placement.paths import shared_data
from sim.workloads.registry import MIXED_CREDITS, WORKLOADS, load_workload

HAVE_DATA = (shared_data() / "traces").is_dir() and (shared_data() / "tenants").is_dir()


def test_catalogue() -> None:
    assert set(WORKLOADS) == {
        "mooncake",
        "azure-conv",
        "azure-code",
        "servegen",
        "servegen-reason",
        "synthetic",
        "mixed",
        "kv-bound",
        "multi-model",
        "tiers",
    }


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(InputError) as caught:
        load_workload("moonkake")
    assert "moonkake" in str(caught.value)
    assert all(name in str(caught.value) for name in WORKLOADS)


def test_synthetic_defaults_duration_and_limit() -> None:
    workload = load_workload("synthetic", seed=1)
    assert 590 < workload.duration_s < 600
    assert len(workload) / 600 == pytest.approx(20, rel=0.15)
    short = load_workload("synthetic", seed=1, duration_s=60, limit=100)
    assert len(short) == 100
    assert short.requests[-1].arrival_s < 60
    assert load_workload("synthetic", seed=1, limit=0).requests == []
    with pytest.raises(InputError):
        load_workload("synthetic", duration_s=0)


@pytest.mark.skipif(not HAVE_DATA, reason="no shared data")
@pytest.mark.parametrize("name", ["mooncake", "azure-conv", "azure-code"])
def test_traces_cut_by_duration(name: str) -> None:
    workload = load_workload(name, duration_s=120)
    assert len(workload) > 10
    assert workload.requests[-1].arrival_s < 120
    assert [r.id for r in workload.requests[:3]] == [0, 1, 2]


@pytest.mark.skipif(not HAVE_DATA, reason="no shared data")
def test_servegen_entries() -> None:
    small = load_workload("servegen", duration_s=30, seed=1)
    reason = load_workload("servegen-reason", duration_s=300, seed=1, limit=500)
    assert all(t.startswith("sg-") for t in small.tenants)
    assert len(small) > 10_000
    assert len(reason) == 500


@pytest.mark.skipif(not HAVE_DATA, reason="no shared data")
def test_mixed_populations_and_credits() -> None:
    workload = load_workload("mixed", duration_s=600, seed=2)
    arrivals = [r.arrival_s for r in workload.requests]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] == 0.0
    assert [r.id for r in workload.requests] == list(range(len(workload)))
    tenants = workload.tenants
    assert {"azure-conv", "azure-code"} <= set(tenants)
    servegen = [t for t in tenants if t.startswith("servegen-")]
    assert len(servegen) > 5
    assert len(servegen) + 2 == len(tenants)
    assert sum(tenants[t].credit_share for t in servegen) == pytest.approx(
        MIXED_CREDITS["servegen"]
    )
    assert tenants["azure-conv"].credit_share == MIXED_CREDITS["azure-conv"]
    assert tenants["azure-code"].credit_share == MIXED_CREDITS["azure-code"]
    from_servegen = sum(r.tenant.startswith("servegen-") for r in workload.requests)
    assert from_servegen / len(workload) == pytest.approx(0.5, abs=0.1)
    assert {r.tenant for r in workload.requests} <= set(tenants)
