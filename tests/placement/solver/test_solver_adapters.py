"""Adapter residency: activity forecast from sub-windows, adapters pinned within each replica's
slots by activity, the rest swapped on a few replicas that pin nothing, a hot adapter spread
over several replicas, the previous plan's residency kept when it still fits."""

from __future__ import annotations

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request
from placement.solver.adapters import adapter_activity, place_adapters
from placement.solver.capacity import default_capacity

WINDOW_S = 100.0


def _fleet(count: int = 3, slots: int = 2):
    group = {"kind": "h100", "accelerator": "H100-SXM", "model": "llama-3-8b"}
    return fleet_from_dict(
        {"name": "lora", "replicas": [group | {"count": count, "max_loras": slots}]}
    )


def _requests(rates: dict[str, float], *, tokens: dict[str, int] | None = None) -> list[Request]:
    """Evenly spaced requests of each adapter (``""``: the base model) over the window."""
    out: list[Request] = []
    for adapter, rate in rates.items():
        n = int(rate * WINDOW_S)
        out += [
            Request(
                len(out) + i,
                i / rate,
                (tokens or {}).get(adapter, 500),
                50,
                tenant=f"t-{adapter}",
                model="llama-3-8b",
                adapter=adapter,
            )
            for i in range(n)
        ]
    return out


def _solve(rates: dict[str, float], fleet=None, **kw):
    return place_adapters(
        _requests(rates),
        fleet or _fleet(),
        DEFAULT_CLASSES,
        default_capacity(),
        window_s=WINDOW_S,
        **kw,
    )


def test_activity_counts_the_sub_windows_with_an_arrival_not_the_rate():
    steady = [i * 1.0 for i in range(100)]  # one a second
    bursty = [10.0 * (i // 10) + 0.01 * i for i in range(100)]  # ten at once every 10 s
    assert adapter_activity(steady, start_s=0.0, window_s=100.0) == 1.0
    assert adapter_activity(bursty, start_s=0.0, window_s=100.0) == 0.1


def test_adapters_that_fit_the_slots_are_all_pinned_and_routed_only_where_pinned():
    rates = {f"a{i}": 0.5 + i * 0.1 for i in range(6)}  # six adapters, 3 replicas × 2 slots
    res = _solve(rates)
    assert res.status == "planned" and res.swap == ()
    for (_, _, adapter), shares in res.share.items():
        assert shares and all(adapter in res.adapters[r] for r in shares)
        assert abs(sum(shares.values()) - 1.0) < 1e-6  # nothing is shed here
    # each replica's pinned adapters are active, between them, no more than its slots
    activity = {f"a{i}": min(1.0, 0.5 + i * 0.1) for i in range(6)}
    for held in res.adapters.values():
        assert sum(activity[a] for a in held) <= 2 + 1e-6


def test_when_the_slots_cannot_hold_every_adapter_the_cold_ones_swap_on_replicas_that_pin_none():
    # twelve always-active adapters (one request a second) for 4 replicas × 2 slots; the four
    # first are five times as busy
    rates = {f"hot{i}": 5.0 for i in range(4)} | {f"cold{i}": 1.0 for i in range(8)}
    res = _solve(rates, fleet=_fleet(count=4, slots=2))
    assert res.swap  # some replicas swap
    swap = set(res.swap)
    assert all(res.adapters[r] == () for r in swap)  # swap replicas pin nothing
    for i in range(4):
        where = set(res.share[(f"t-hot{i}", "llama-3-8b", f"hot{i}")])
        assert where and not where & swap  # the hot ones are pinned on main replicas
    cold = [res.share[(f"t-cold{i}", "llama-3-8b", f"cold{i}")] for i in range(8)]
    swapped = [s for s in cold if set(s) == swap]
    assert len(swapped) >= 4  # at least half the cold ones take turns on the swap replicas
    for shares in res.share.values():
        assert abs(sum(shares.values()) - 1.0) < 1e-6
    for r, held in res.adapters.items():
        assert len(held) <= 2, r  # always-active adapters: no more pinned than slots


def test_a_hot_adapter_gets_several_replicas():
    capacity = default_capacity().table("H100-SXM", "llama-3-8b", 1)
    mu = capacity.lookup(500, 50, capacity.slo_index(_slo()))
    res = _solve({"hot": 1.5 * mu, "cold": 0.05})
    assert len(res.share[("t-hot", "llama-3-8b", "hot")]) >= 2


def test_base_model_traffic_leans_to_the_replicas_with_headroom():
    res = _solve({"": 5.0, "busy": 2.0}, fleet=_fleet(count=2, slots=2))
    (busy_at,) = res.share[("t-busy", "llama-3-8b", "busy")]
    base = res.share[("t-", "llama-3-8b", "")]
    other = next(r for r in base if r != busy_at)
    assert base[other] > base.get(busy_at, 0.0)


def test_the_previous_residency_is_kept_when_it_still_fits():
    rates = {"a": 1.0, "b": 1.0}
    held = {"h100-2": ("a", "b")}
    res = _solve(rates, previous=held)
    assert res.adapters["h100-2"] == ("a", "b")


def _slo():
    from models.capacity import Slo

    c = DEFAULT_CLASSES["interactive"]
    return Slo(c.ttft_slo_s, c.tpot_slo_s)
