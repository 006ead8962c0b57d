"""Adapter residency: slots respected, traffic only where its adapter is resident, a hot
adapter spread over several replicas, the previous plan's residency kept when it is as good."""

from __future__ import annotations

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request
from placement.solver.adapters import place_adapters
from placement.solver.capacity import default_capacity

WINDOW_S = 100.0


def _fleet(count: int = 3, slots: int = 2):
    group = {"kind": "h100", "accelerator": "H100-SXM", "model": "llama-3-8b"}
    return fleet_from_dict(
        {"name": "lora", "replicas": [group | {"count": count, "max_loras": slots}]}
    )


def _requests(rates: dict[str, float]) -> list[Request]:
    out: list[Request] = []
    for adapter, rate in rates.items():
        n = int(rate * WINDOW_S)
        out += [
            Request(
                len(out) + i,
                i / rate,
                500,
                50,
                tenant=f"t-{adapter}",
                model="llama-3-8b",
                adapter=adapter,
            )
            for i in range(n)
        ]
    return out


def _solve(rates: dict[str, float], **kw):
    return place_adapters(
        _requests(rates), _fleet(), DEFAULT_CLASSES, default_capacity(), window_s=WINDOW_S, **kw
    )


def test_every_replica_holds_at_most_its_slots_and_routes_go_only_where_resident():
    rates = {f"a{i}": 0.5 + i * 0.1 for i in range(6)}  # six adapters, 3 replicas × 2 slots
    res = _solve(rates)
    assert res.status == "optimal"
    assert all(len(held) <= 2 for held in res.adapters.values())
    for (_, _, adapter), shares in res.share.items():
        assert all(adapter in res.adapters[r] for r in shares)
        assert abs(sum(shares.values()) - 1.0) < 1e-6  # light load: everything is served


def test_a_hot_adapter_gets_several_replicas():
    capacity = default_capacity().table("H100-SXM", "llama-3-8b", 1)
    mu = capacity.lookup(500, 50, capacity.slo_index(_slo()))
    res = _solve({"hot": 1.5 * mu, "cold": 0.05})
    assert len(res.share[("t-hot", "llama-3-8b", "hot")]) >= 2


def test_the_previous_residency_is_kept_when_it_serves_as_well():
    rates = {"a": 1.0, "b": 1.0}
    held = {"h100-2": ("a", "b")}
    res = _solve(rates, previous=held)
    assert res.adapters["h100-2"] == ("a", "b")


def _slo():
    from models.capacity import Slo

    c = DEFAULT_CLASSES["interactive"]
    return Slo(c.ttft_slo_s, c.tpot_slo_s)
