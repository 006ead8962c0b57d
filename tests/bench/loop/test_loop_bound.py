from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from bench.loop.bound import FluidBound, fluid_bound
from bench.loop.bound_kv import reuse_groups
from models.capacity import Slo
from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import DEFAULT_CLASSES, Request
from placement.errors import InputError
from placement.solver.capacity import CapacityLookup, CapacitySource, FixedCapacity

MODEL = "llama-3-8b"
BLOCK = 512
CAP = FixedCapacity({"H100-SXM": 10.0, "L40S": 4.0})


def _fleet(h100: int = 2, l40s: int = 0) -> Fleet:
    groups = [{"kind": "h100", "accelerator": "H100-SXM", "count": h100, "model": MODEL}]
    if l40s:
        groups.append({"kind": "l40s", "accelerator": "L40S", "count": l40s, "model": MODEL})
    return fleet_from_dict({"name": "test", "replicas": groups})


def _requests(
    rate: float,
    window: float,
    *,
    start_s: float = 0.0,
    first_id: int = 0,
    cls: str = "interactive",
    model: str = MODEL,
    shared_prefix: bool = False,
    input_tokens: int = 4 * BLOCK,
) -> list[Request]:
    n = round(rate * window)
    out = []
    for i in range(n):
        rid = first_id + i
        # three blocks common to all when shared, then one of the request's own
        head = [1, 2, 3] if shared_prefix else [10_000_000 + 3 * rid + j for j in range(3)]
        out.append(
            Request(
                rid,
                start_s + window * i / n,
                input_tokens,
                100,
                request_class=cls,
                model=model,
                block_hashes=chain_block_ids([*head, 20_000_000 + rid]),
            )
        )
    return out


def _bound(
    requests: list[Request], fleet: Fleet, capacity: CapacitySource = CAP, **kw: Any
) -> FluidBound:
    kw.setdefault("block_tokens", BLOCK)
    return fluid_bound(requests, fleet, DEFAULT_CLASSES, capacity, **kw)


@dataclass(frozen=True)
class _ShorterPromptsFaster:
    """One replica serves ``tokens_per_s / uncached prompt`` req/s at any SLO."""

    tokens_per_s: float
    source: str = "fake"

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        return self

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        return self.tokens_per_s / mean_input_tokens

    def slo_index(self, slo: Slo) -> int:
        return 0


@dataclass(frozen=True)
class _OnlyLooseSlo:
    """Holds the batch SLO (index 1) at ``rate`` req/s, the interactive one (index 0) never."""

    rate: float
    source: str = "fake"

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        return self

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        return self.rate if slo_index == 1 else 0.0

    def slo_index(self, slo: Slo) -> int:
        return 1 if slo.ttft_p95_s > DEFAULT_CLASSES["interactive"].ttft_slo_s else 0


def test_under_capacity_the_bound_is_the_offered_rate() -> None:
    bound = _bound(_requests(12, 60), _fleet(), window_s=60.0)
    assert bound.offered_rps == pytest.approx(12.0)
    assert bound.goodput_rps == pytest.approx(12.0)
    assert bound.reachable_rps == pytest.approx(12.0)
    assert bound.slices == 2
    assert bound.slice_s == 30.0


def test_over_capacity_the_bound_is_the_fleets_capacity() -> None:
    # 2 × 10 + 1 × 4 req/s of capacity against 40 req/s offered
    bound = _bound(_requests(40, 60), _fleet(h100=2, l40s=1), window_s=60.0)
    assert bound.offered_rps == pytest.approx(40.0)
    assert bound.goodput_rps == pytest.approx(24.0)


def test_an_unhealthy_replica_lowers_the_bound() -> None:
    reqs = _requests(40, 60)
    healthy = _bound(reqs, _fleet(), window_s=60.0)
    one_down = _bound(reqs, _fleet(), window_s=60.0, unhealthy={"h100-0"})
    all_down = _bound(reqs, _fleet(), window_s=60.0, unhealthy={"h100-0", "h100-1"})
    assert healthy.goodput_rps == pytest.approx(20.0)
    assert one_down.goodput_rps == pytest.approx(10.0)
    assert all_down.goodput_rps == 0.0
    assert all_down.reachable_rps == 0.0


def test_demand_is_met_slice_by_slice_not_on_average() -> None:
    # 20 req/s for the first 30 s then nothing: on average 10 req/s fits 10 req/s of capacity,
    # but the burst only gets 10 req/s while it lasts
    reqs = _requests(20, 30) + _requests(0.1, 30, start_s=30.0, first_id=5000)
    bound = _bound(reqs, _fleet(h100=1), window_s=60.0)
    assert bound.offered_rps == pytest.approx(603 / 60)
    assert bound.goodput_rps == pytest.approx((300 + 3) / 60)


def test_shared_prefixes_raise_the_bound_through_the_perfect_cache() -> None:
    capacity = _ShorterPromptsFaster(tokens_per_s=51_200.0)  # 25 req/s at 2048, 100 at 512
    fleet = _fleet(h100=1)
    distinct = _bound(_requests(200, 10), fleet, capacity, slice_s=10.0, window_s=10.0)
    shared = _bound(
        _requests(200, 10, shared_prefix=True), fleet, capacity, slice_s=10.0, window_s=10.0
    )
    assert distinct.goodput_rps == pytest.approx(25.0)
    # every request after the first finds its three shared blocks cached: 512 tokens uncached
    assert shared.goodput_rps == pytest.approx(100.0)


def test_cached_tokens_leave_at_least_one_token_to_compute() -> None:
    # the same single-block prompt over and over: fully cached but for its last token
    capacity = _ShorterPromptsFaster(tokens_per_s=100.0)
    reqs = [
        Request(i, i / 1000, BLOCK, 10, model=MODEL, block_hashes=chain_block_ids([7]))
        for i in range(1000)
    ]
    bound = _bound(reqs, _fleet(h100=1), capacity, slice_s=1.0, window_s=1.0)
    # 999 requests at 1 uncached token (100 req/s of capacity, 999 offered); the first at 512
    assert bound.goodput_rps == pytest.approx(100.0)


def test_a_class_no_kind_can_serve_is_unreachable() -> None:
    reqs = _requests(5, 60) + _requests(3, 60, cls="batch", first_id=5000)
    bound = _bound(reqs, _fleet(), _OnlyLooseSlo(rate=100.0), window_s=60.0)
    assert bound.offered_rps == pytest.approx(8.0)
    assert bound.reachable_rps == pytest.approx(3.0)
    assert bound.goodput_rps == pytest.approx(3.0)


def test_a_kind_serves_only_its_own_model() -> None:
    fleet = fleet_from_dict(
        {
            "name": "two-models",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": MODEL},
                {
                    "kind": "big",
                    "accelerator": "L40S",
                    "count": 3,
                    "model": "qwen2.5-32b",
                    "tp": 4,
                },
            ],
        }
    )
    reqs = _requests(30, 60) + _requests(1, 60, model="", first_id=9000)
    bound = _bound(reqs, fleet, window_s=60.0)
    # the llama requests get the one H100; requests naming no model on a two-model fleet, none
    assert bound.goodput_rps == pytest.approx(10.0)
    assert bound.reachable_rps == pytest.approx(30.0)


def test_a_request_without_a_model_takes_the_fleets_only_model() -> None:
    bound = _bound(_requests(5, 60, model=""), _fleet(), window_s=60.0)
    assert bound.goodput_rps == pytest.approx(5.0)


def test_the_default_window_is_the_span_of_arrivals() -> None:
    reqs = _requests(5, 100, start_s=50.0)  # arrivals 50 … 149.8
    bound = _bound(reqs, _fleet())
    span = reqs[-1].arrival_s - reqs[0].arrival_s
    assert bound.offered_rps == pytest.approx(500 / span)
    assert bound.goodput_rps == pytest.approx(bound.offered_rps)
    assert bound.slices == 4


def test_no_requests_give_zeros() -> None:
    bound = _bound([], _fleet())
    assert bound == FluidBound(
        goodput_rps=0.0, offered_rps=0.0, reachable_rps=0.0, slices=0, slice_s=30.0
    )


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"slice_s": 0.0}, "slice_s"),
        ({"slice_s": -5.0}, "slice_s"),
        ({"block_tokens": 0}, "block_tokens"),
        ({"window_s": 0.0}, "window_s"),
        ({"unhealthy": {"nope-0"}}, "unhealthy"),
    ],
)
def test_bad_arguments_name_their_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        _bound(_requests(1, 10), _fleet(), **kw)
    assert info.value.field == field


def test_an_unknown_request_class_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        _bound(_requests(1, 10, cls="premium"), _fleet())
    assert info.value.field == "request_class"
    assert "premium" in str(info.value)


def _documents(docs: int, blocks: int, n: int, window: float) -> list[Request]:
    """``n`` requests spread evenly over ``window``, round-robin over ``docs`` documents of
    ``blocks`` blocks each; every request adds one block of its own."""
    chains = [chain_block_ids(range(d * 1000, d * 1000 + blocks)) for d in range(docs)]
    return [
        Request(
            i,
            window * i / n,
            (blocks + 1) * BLOCK,
            10,
            model=MODEL,
            block_hashes=chains[i % docs] + chain_block_ids([10**7 + i], root=chains[i % docs][-1]),
        )
        for i in range(n)
    ]


def test_reuse_groups_charge_nested_prefixes_once() -> None:
    doc = chain_block_ids(range(4))
    turn2 = doc + chain_block_ids([50, 51], root=doc[-1])
    turn3 = turn2 + chain_block_ids([60], root=turn2[-1])
    reqs = [
        Request(0, 0.0, 5 * BLOCK, 10, block_hashes=doc + chain_block_ids([70], root=doc[-1])),
        Request(1, 1.0, 7 * BLOCK, 10, block_hashes=turn2),  # reuses the 4 document blocks
        Request(2, 2.0, 8 * BLOCK, 10, block_hashes=turn3),  # reuses turn 2's 6 blocks
        Request(3, 3.0, 8 * BLOCK, 10, block_hashes=chain_block_ids([99])),  # nothing
    ]
    groups = reuse_groups(reqs, BLOCK)
    assert groups.group.tolist() == [-1, 0, 1, -1]
    # the document's 4 blocks, then turn 2's 2 blocks beyond them
    assert groups.kv_tokens.tolist() == [4 * BLOCK, 2 * BLOCK]


def test_kv_capacity_binds_when_the_hot_prefixes_outgrow_the_caches() -> None:
    # one H100 (411,529 KV tokens) and two documents of 450 blocks (230,400 tokens each):
    # both fit an unbounded cache, one and a bit fit the real one. Warm, a request computes
    # one block (1,000 req/s of capacity); cold, its whole prompt (~0.43 req/s).
    capacity = _ShorterPromptsFaster(tokens_per_s=100_000.0)
    reqs = _documents(docs=2, blocks=450, n=200, window=10.0)
    fleet = _fleet(h100=1)
    unbounded = _bound(reqs, fleet, capacity, slice_s=10.0, window_s=10.0, kv_capacity=False)
    bounded = _bound(reqs, fleet, capacity, slice_s=10.0, window_s=10.0)
    assert unbounded.goodput_rps == pytest.approx(20.0)
    # held: one document whole, the other 181,129 / 230,400 of the slice: 10 + 7.86 req/s
    # warm, the rest of the time on cold prompts (0.43 req/s), and the first of each cold
    kv = fleet.replicas[0].kv_capacity_tokens
    share = (kv - 450 * BLOCK) / (450 * BLOCK)
    warm = 10.0 + 10.0 * share * 99 / 100
    assert warm < bounded.goodput_rps < warm + 0.5
    assert bounded.goodput_rps < unbounded.goodput_rps - 1.5


def test_kv_capacity_changes_nothing_when_the_prefixes_fit() -> None:
    capacity = _ShorterPromptsFaster(tokens_per_s=100_000.0)
    reqs = _documents(docs=2, blocks=300, n=200, window=10.0)  # 2 × 153,600 tokens
    fleet = _fleet(h100=1)
    unbounded = _bound(reqs, fleet, capacity, slice_s=10.0, window_s=10.0, kv_capacity=False)
    bounded = _bound(reqs, fleet, capacity, slice_s=10.0, window_s=10.0)
    assert bounded.goodput_rps == pytest.approx(unbounded.goodput_rps)


def test_more_replicas_hold_more_prefixes() -> None:
    capacity = _ShorterPromptsFaster(tokens_per_s=100_000.0)
    reqs = _documents(docs=4, blocks=450, n=400, window=10.0)
    one = _bound(reqs, _fleet(h100=1), capacity, slice_s=10.0, window_s=10.0)
    two = _bound(reqs, _fleet(h100=2), capacity, slice_s=10.0, window_s=10.0)
    four = _bound(reqs, _fleet(h100=4), capacity, slice_s=10.0, window_s=10.0)
    assert one.goodput_rps < two.goodput_rps < four.goodput_rps
    assert four.goodput_rps == pytest.approx(40.0)  # one document per replica, all served


def _lora_fleet(slots: int, gbps: float = 2.0) -> Fleet:
    group = {"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": MODEL}
    return fleet_from_dict(
        {"name": "lora", "replicas": [group | {"max_loras": slots, "lora_load_gbps": gbps}]}
    )


def _with_adapters(requests: list[Request], n: int) -> tuple[list[Request], dict[str, Any]]:
    from placement.domain.adapters import LoraAdapter

    for i, r in enumerate(requests):
        r.adapter = f"a{i % n}"
    return requests, {f"a{i}": LoraAdapter(name=f"a{i}", base=MODEL, rank=64) for i in range(n)}


def test_adapter_loads_take_replica_time_from_the_bound():
    from placement.domain.adapters import lora_load_s
    from placement.domain.llm import get_model

    # saturated: 2 replicas × 10 req/s offered 30 req/s over 4 slices of 10 s
    reqs, adapters = _with_adapters(_requests(30.0, 40.0), 40)
    plain = _bound(reqs, _lora_fleet(slots=40), slice_s=10.0, window_s=40.0)
    assert plain.goodput_rps == pytest.approx(20.0, rel=1e-3)
    # slots for every adapter: only the first (cold) slice loads all 40
    warm = _bound(reqs, _lora_fleet(slots=40), slice_s=10.0, window_s=40.0, adapters=adapters)
    load = lora_load_s(get_model(MODEL), 64, gbps=2.0)
    lost = 40 * load * 10.0 / 40.0  # replica-seconds × req/s per replica-second, over 40 s
    assert warm.goodput_rps == pytest.approx(20.0 - lost, rel=1e-3)
    # 4 slots for 40 adapters: every slice reloads at least 36
    tight = _bound(reqs, _lora_fleet(slots=2), slice_s=10.0, window_s=40.0, adapters=adapters)
    assert tight.goodput_rps == pytest.approx(20.0 - (40 + 3 * 36) * load * 10.0 / 40.0, rel=1e-3)
    # a faster load path costs less
    fast = _bound(
        reqs, _lora_fleet(slots=2, gbps=20.0), slice_s=10.0, window_s=40.0, adapters=adapters
    )
    assert tight.goodput_rps < fast.goodput_rps < plain.goodput_rps
    # the program with KV capacity (the default) charges the loads as the one without does
    unbounded = _bound(
        reqs,
        _lora_fleet(slots=2),
        slice_s=10.0,
        window_s=40.0,
        adapters=adapters,
        kv_capacity=False,
    )
    assert unbounded.goodput_rps == pytest.approx(tight.goodput_rps, rel=1e-6)


def _swap_pool(llama: int, qwen: int, *, models: bool = True) -> Fleet:
    extra: dict[str, Any] = {"models": [MODEL, "qwen2-7b"]} if models else {}
    groups = [
        {"kind": "a", "accelerator": "H100-SXM", "count": llama, "model": MODEL, **extra},
        {"kind": "b", "accelerator": "H100-SXM", "count": qwen, "model": "qwen2-7b", **extra},
    ]
    return fleet_from_dict({"name": "pool", "replicas": groups})


@pytest.mark.parametrize("kv_capacity", [True, False])
def test_base_models_move_freely_in_the_bound_but_share_the_replicas(kv_capacity: bool) -> None:
    # 30 req/s of llama for 60 s, then 30 req/s of qwen: 10 req/s per replica, three replicas
    reqs = _requests(30, 60) + _requests(30, 60, start_s=60.0, model="qwen2-7b", first_id=5000)
    kw: dict[str, Any] = {"window_s": 120.0, "kv_capacity": kv_capacity}
    fixed = _bound(reqs, _swap_pool(2, 1, models=False), **kw)
    free = _bound(reqs, _swap_pool(2, 1), **kw)
    # fixed: llama on 2 replicas (20 req/s), then qwen on 1 (10 req/s); free: all 3 each time
    assert fixed.goodput_rps == pytest.approx((20 * 60 + 10 * 60) / 120)
    assert free.goodput_rps == pytest.approx(30.0)
    # both models at once still share the three replicas
    both = _requests(30, 60) + _requests(30, 60, model="qwen2-7b", first_id=5000)
    assert _bound(both, _swap_pool(2, 1), window_s=60.0).goodput_rps == pytest.approx(30.0)
