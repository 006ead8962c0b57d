"""Base-model placement: replicas follow each model's demand, with a churn cost and a floor."""

from __future__ import annotations

import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.errors import InputError
from placement.solver.base_models import (
    HYSTERESIS,
    MAX_SWAPS,
    SHORT,
    place_base_models,
    slot_demand,
    swappable,
    with_residency,
)
from placement.solver.capacity import CapacityLookup, FixedCapacity

CAP = FixedCapacity({"H100-SXM": 10.0})  # req/s per replica, any model


def pool(llama: int, qwen: int, *, startup_s: float = 2.0, max_loras: int = 0) -> Fleet:
    group = {
        "accelerator": "H100-SXM",
        "max_loras": max_loras,
        "models": ["llama-3-8b", "qwen2-7b"],
        "weights_load_gbps": 10.0,
        "startup_s": startup_s,
    }
    groups = [
        {"kind": "a", "count": llama, "model": "llama-3-8b", **group},
        {"kind": "b", "count": qwen, "model": "qwen2-7b", **group},
    ]
    return fleet_from_dict({"name": "pool", "replicas": [g for g in groups if g["count"]]})


def demand(llama_rps: float, qwen_rps: float, window_s: float = 10.0) -> list[Request]:
    out: list[Request] = []
    for model, rps in (("llama-3-8b", llama_rps), ("qwen2-7b", qwen_rps)):
        n = int(rps * window_s)
        out += [Request(len(out) + i, i * window_s / n, 100, 10, model=model) for i in range(n)]
    return out


def place(fleet: Fleet, reqs: list[Request], **kw: object):
    args: dict[str, object] = {"window_s": 10.0, "horizon_s": 120.0, **kw}
    return place_base_models(reqs, fleet, DEFAULT_CLASSES, CAP, **args)  # type: ignore[arg-type]


def held(placed, model: str) -> int:
    return sum(1 for m in placed.models.values() if m == model)


def test_replicas_follow_demand_from_the_current_holders():
    fleet = pool(6, 2)
    placed = place(fleet, demand(40.0, 40.0))  # 4 replicas' worth each
    assert placed.demand == pytest.approx({"llama-3-8b": 4.0, "qwen2-7b": 4.0})
    assert held(placed, "qwen2-7b") == 2 + MAX_SWAPS  # at most MAX_SWAPS per plan
    assert set(placed.swaps) <= {r.id for r in fleet.replicas if r.model.name == "llama-3-8b"}
    again = place(with_residency(fleet, placed.models), demand(40.0, 40.0))
    assert again.swaps == ()  # balanced: nothing moves


def test_a_small_imbalance_or_a_dear_swap_moves_nothing():
    fleet = pool(4, 4)
    assert place(fleet, demand(42.0, 38.0)).swaps == ()  # within the hysteresis
    # the same imbalance that moves a replica when swaps are cheap stays when one costs more
    # than the plan's horizon gains
    assert place(fleet, demand(60.0, 20.0)).swaps
    assert place(pool(4, 4, startup_s=200.0), demand(60.0, 20.0)).swaps == ()
    assert HYSTERESIS > 0


def test_a_model_with_demand_keeps_a_replica_and_one_without_a_holder_gets_one():
    placed = place(pool(1, 7), demand(0.5, 80.0))
    assert held(placed, "llama-3-8b") == 1
    placed = place(pool(8, 0), demand(60.0, 5.0))
    assert held(placed, "qwen2-7b") == 1


def test_unhealthy_replicas_stay_as_they_are_and_fixed_fleets_do_not_swap():
    fleet = pool(6, 2)
    sick = [r.id for r in fleet.replicas if r.model.name == "llama-3-8b"][-1]
    placed = place(fleet, demand(40.0, 40.0), unhealthy={sick})
    assert sick not in placed.swaps and placed.models[sick] == "llama-3-8b"
    fixed = fleet_from_dict(
        {
            "name": "f",
            "replicas": [
                {"kind": "a", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"}
            ],
        }
    )
    assert not swappable(fixed) and swappable(fleet)
    assert place(fixed, demand(40.0, 0.0)).swaps == ()


def test_with_residency_recomputes_kv_and_bad_windows_are_refused():
    fleet = pool(1, 1)
    moved = with_residency(fleet, {fleet.replicas[0].id: "qwen2-7b"})
    assert moved.replicas[0].model.name == "qwen2-7b"
    assert moved.replicas[0].kv_capacity_tokens == fleet.replicas[1].kv_capacity_tokens
    with pytest.raises(InputError):
        place(fleet, demand(1.0, 1.0), window_s=0.0)


# by credit: tenant "a" sends Llama traffic (credit 0.375), "b" Qwen traffic (credit 0.225)
CREDITS = {"a": Tenant(name="a", credit_share=0.375), "b": Tenant(name="b", credit_share=0.225)}


def tenant_demand(llama_rps: float, qwen_rps: float, window_s: float = 10.0) -> list[Request]:
    out: list[Request] = []
    for model, tenant, rps in (("llama-3-8b", "a", llama_rps), ("qwen2-7b", "b", qwen_rps)):
        n = int(rps * window_s)
        out += [
            Request(len(out) + i, i * window_s / n, 100, 10, tenant=tenant, model=model)
            for i in range(n)
        ]
    return out


def by_credit(fleet: Fleet, reqs: list[Request], **kw: object):
    return place(fleet, reqs, credits=CREDITS, **kw)


def test_by_credit_a_model_short_of_its_entitlement_gains_from_either_start():
    # both ask for 10 replicas of 8: owed 5 : 3 by credit, whichever split they start from
    reqs = tenant_demand(100.0, 100.0)
    placed = by_credit(pool(7, 1), reqs)
    assert held(placed, "qwen2-7b") == 1 + MAX_SWAPS
    assert by_credit(with_residency(pool(7, 1), placed.models), reqs).swaps == ()
    assert by_credit(pool(5, 3), reqs).swaps == ()
    # the utilisation rule balances the work (4 : 4) whatever the credits
    assert held(place(pool(3, 5), reqs), "qwen2-7b") == 4
    assert held(by_credit(pool(3, 5), reqs), "qwen2-7b") == 3


def test_by_credit_requests_that_cost_more_are_owed_fewer_replicas():
    # Qwen's requests charged 4× Llama's per replica they use: fair in the charge, Qwen is owed
    # about one replica and Llama takes the rest
    reqs = tenant_demand(100.0, 100.0)

    def price(r: Request) -> float:
        return 0.4 if r.model == "qwen2-7b" else 0.1

    placed = by_credit(pool(5, 3), reqs, price=price)
    assert held(placed, "qwen2-7b") == 1 and len(placed.swaps) == MAX_SWAPS


def test_by_credit_spare_replicas_go_where_they_serve_more_and_stay():
    # 6.5 + 1 replicas of demand on 8: both within their entitlement; the spare Qwen replica
    # serves nothing more, on Llama it serves half a replica's requests
    reqs = tenant_demand(65.0, 10.0)
    placed = by_credit(pool(6, 2), reqs)
    assert held(placed, "qwen2-7b") == 1
    again = by_credit(with_residency(pool(6, 2), placed.models), reqs)
    assert again.swaps == ()
    # a model with demand keeps a replica even when the other could use it
    assert held(by_credit(pool(7, 1), tenant_demand(200.0, 1.0)), "qwen2-7b") == 1
    # nothing to gain: nothing moves
    assert by_credit(pool(4, 4), tenant_demand(20.0, 10.0)).swaps == ()
    assert SHORT > 0.5


class ByModel:
    """Capacity at SLO per base model (req/s per replica, any mix and SLO)."""

    source = "by model"

    def __init__(self, rates: dict[str, float]) -> None:
        self.rates = rates

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        return FixedCapacity({accelerator: self.rates[model]}).table(accelerator, model, tp)


# multi-model's head at load 1 read through two learned capacities that a 1% change in Qwen's
# prefill attention gave (bench/RESULTS.md): Llama 13.8 vs 18.2 req/s per replica, Qwen 2.7 vs 5.7
READINGS = (
    ByModel({"llama-3-8b": 13.8, "qwen2-7b": 2.7}),
    ByModel({"llama-3-8b": 18.2, "qwen2-7b": 5.7}),
)


def test_by_credit_the_split_holds_where_the_capacity_reading_moves():
    reqs = tenant_demand(400.0, 16.8)

    def price(r: Request) -> float:  # a Qwen reasoning request costs ~40 short Llama ones
        return 0.4 if r.model == "qwen2-7b" else 0.01

    def qwen_replicas(capacity: ByModel, **kw: object) -> int:
        args: dict[str, object] = {"window_s": 10.0, "horizon_s": 120.0, **kw}
        placed = place_base_models(reqs, pool(5, 3), DEFAULT_CLASSES, capacity, **args)  # type: ignore[arg-type]
        return held(placed, "qwen2-7b")

    # balancing utilisation, the split follows the reading: 6 : 2 on one, 7 : 1 on the other
    assert [qwen_replicas(c) for c in READINGS] == [2, 1]
    # by credit charged by cost, both readings give Llama every replica but Qwen's kept one
    assert [qwen_replicas(c, credits=CREDITS, price=price) for c in READINGS] == [1, 1]


def adapter_demand(adapters: int, qwen_rps: float, window_s: float = 10.0) -> list[Request]:
    """One Llama request a second on each of ``adapters`` adapters (every second busy), and
    ``qwen_rps`` of base Qwen requests."""
    out = [
        Request(i * adapters + a, i + 0.5, 100, 10, model="llama-3-8b", adapter=f"lora-{a}")
        for i in range(int(window_s))
        for a in range(adapters)
    ]
    n = int(qwen_rps * window_s)
    return out + [
        Request(len(out) + i, i * window_s / n, 100, 10, model="qwen2-7b") for i in range(n)
    ]


def test_slot_demand_counts_each_adapters_activity_against_the_slots():
    reqs = adapter_demand(20, 0.0)
    assert slot_demand(reqs, "llama-3-8b", 4, 10.0) == pytest.approx(20 / 4)
    assert slot_demand(reqs, "qwen2-7b", 4, 10.0) == 0.0  # no adapters: no slots
    # an adapter busy one second in ten holds a tenth of a slot, whatever its rate
    burst = [Request(i, 0.1 * i, 100, 10, model="llama-3-8b", adapter="x") for i in range(10)]
    late = Request(10, 9.5, 100, 10, model="qwen2-7b")
    assert slot_demand([*burst, late], "llama-3-8b", 1, 10.0) == pytest.approx(0.1)
    with pytest.raises(InputError, match="max_loras"):
        slot_demand(reqs, "llama-3-8b", 0, 10.0)


def test_by_slots_a_model_with_many_adapters_gains_replicas_its_work_would_not():
    # 2 replicas' work each, but Llama's 20 busy adapters fill 5 replicas of 4 slots
    reqs = adapter_demand(20, 20.0)
    fleet = pool(4, 4, max_loras=4)
    assert place(fleet, reqs).swaps == ()  # by work alone the split is balanced
    placed = place(fleet, reqs, slots=True)
    assert placed.demand == pytest.approx({"llama-3-8b": 5.0, "qwen2-7b": 2.0})
    assert held(placed, "llama-3-8b") == 5  # 5 / 5 against 2 / 3: one more would tip Qwen
    # with no slots in the group there is nothing to count: the work decides
    assert place(pool(4, 4), reqs, slots=True).swaps == ()
