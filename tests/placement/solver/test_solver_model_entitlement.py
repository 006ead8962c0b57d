"""A model's entitlement in a swap group: its tenants' credits, max-min fair in the charge."""

from __future__ import annotations

import pytest

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.errors import InputError
from placement.solver.capacity import FixedCapacity
from placement.solver.model_entitlement import TenantDemand, model_entitlements, tenant_demand

TENANTS = {
    "a": Tenant(name="a", credit_share=0.375),
    "b": Tenant(name="b", credit_share=0.225),
}


def test_replica_time_charge_is_the_plain_credit_water_filling():
    # both ask for more than the group: split 0.375 : 0.225 of 8 replicas
    owed = model_entitlements(
        [TenantDemand("a", "L", 1.0, 10.0, 10.0), TenantDemand("b", "Q", 1.0, 10.0, 10.0)],
        TENANTS,
        8.0,
    )
    assert owed == pytest.approx({"L": 5.0, "Q": 3.0})
    # what b does not need goes to a
    owed = model_entitlements(
        [TenantDemand("a", "L", 1.0, 37.0, 37.0), TenantDemand("b", "Q", 1.0, 2.7, 2.7)],
        TENANTS,
        8.0,
    )
    assert owed == pytest.approx({"L": 5.3, "Q": 2.7})


def test_a_tenant_whose_requests_cost_much_per_replica_is_owed_fewer_replicas():
    # b's traffic costs 3.6 per replica it uses, a's 0.8: fair in the charge, b gets ~1 replica
    owed = model_entitlements(
        [TenantDemand("a", "L", 1.0, 14.0, 11.8), TenantDemand("b", "Q", 1.0, 7.0, 25.7)],
        TENANTS,
        8.0,
    )
    assert owed["L"] + owed["Q"] == pytest.approx(8.0)
    served_a, served_b = owed["L"] / 14.0 * 11.8, owed["Q"] / 7.0 * 25.7
    assert served_a / 0.375 == pytest.approx(served_b / 0.225)  # the same level
    assert owed["Q"] == pytest.approx(0.97, abs=0.01)


def test_enough_replicas_serve_everyone_in_full_and_bad_input_is_refused():
    owed = model_entitlements(
        [TenantDemand("a", "L", 1.0, 2.0, 1.0), TenantDemand("b", "Q", 1.0, 2.0, 3.0)],
        TENANTS,
        8.0,
    )
    assert owed == pytest.approx({"L": 2.0, "Q": 2.0})
    # a tenant without a credit share weighs as the smallest positive one
    owed = model_entitlements(
        [TenantDemand("b", "Q", 1.0, 10.0, 10.0), TenantDemand("c", "L", 1.0, 10.0, 10.0)],
        TENANTS,
        4.0,
    )
    assert owed == pytest.approx({"Q": 2.0, "L": 2.0})
    with pytest.raises(InputError):
        model_entitlements([], TENANTS, -1.0)


def test_tenant_demand_reads_the_lowest_capacity_and_prices_requests():
    fleet = fleet_from_dict(
        {
            "name": "f",
            "replicas": [
                {"kind": "a", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
            ],
        }
    )
    reqs = [Request(i, i * 0.1, 100, 10, tenant="a", model="llama-3-8b") for i in range(100)] + [
        Request(100, 0.0, 100, 10, tenant="b", model="qwen2-7b")
    ]
    fast, slow = FixedCapacity({"H100-SXM": 10.0}), FixedCapacity({"H100-SXM": 5.0})
    (a,) = tenant_demand(
        reqs, ["llama-3-8b"], fleet.replicas[0], DEFAULT_CLASSES, [fast], window_s=10.0
    )
    assert (a.tenant, a.rate, a.replicas, a.charge) == ("a", 10.0, pytest.approx(1.0), 1.0)
    (a,) = tenant_demand(
        reqs,
        ["llama-3-8b"],
        fleet.replicas[0],
        DEFAULT_CLASSES,
        [fast, slow],
        window_s=10.0,
        price=lambda r: 0.5,
    )
    assert a.replicas == pytest.approx(2.0) and a.charge == pytest.approx(5.0)
    bad = [Request(0, 0.0, 100, 10, tenant="a", model="llama-3-8b", request_class="nope")]
    with pytest.raises(InputError):
        tenant_demand(bad, ["llama-3-8b"], fleet.replicas[0], DEFAULT_CLASSES, [fast], 10.0)
