"""The flow-control queue: bands, per-tenant fairness by credit, earliest deadline first,
refusals at the door, expiry, removal, lengths."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from serving.flow import FlowPolicy, FlowQueue, Waiting


def _item(
    q: FlowQueue[str],
    name: str,
    *,
    tenant: str = "a",
    band: int = 0,
    arrival: float = 0.0,
    slo: float = 2.0,
    service_s: float = 0.0,
    tokens: int = 100,
) -> Waiting[str]:
    return q.make(
        name,
        tenant=tenant,
        band=band,
        arrival=arrival,
        ttft_slo_s=slo,
        service_s=service_s,
        input_tokens=tokens,
    )


def _drain(q: FlowQueue[str], now: float, limit: int = 100) -> list[str]:
    """Dispatch everything, in the queue's order."""
    out: list[str] = []
    for item in q.candidates():
        q.dispatched(item, now)
        out.append(item.payload)
        if len(out) == limit:
            break
    return out


def test_earliest_dispatch_deadline_first_within_a_tenant() -> None:
    q: FlowQueue[str] = FlowQueue()
    for name, arrival, slo in (("late", 0.0, 5.0), ("soon", 0.1, 1.0), ("mid", 0.0, 2.0)):
        assert q.offer(_item(q, name, arrival=arrival, slo=slo), 0.1).queued
    assert _drain(q, 0.2) == ["soon", "mid", "late"]


def test_the_prefill_time_brings_the_dispatch_deadline_forward() -> None:
    q: FlowQueue[str] = FlowQueue()
    q.offer(_item(q, "short", slo=2.0, service_s=0.0), 0.0)
    q.offer(_item(q, "long", slo=2.0, service_s=1.5), 0.0)
    assert _drain(q, 0.0) == ["long", "short"]


def test_a_lower_band_needs_its_prefill_within_its_headroom_of_the_time_left() -> None:
    # standard (band 1) at headroom 0.4 with a 3 s SLO: a 1.5 s prefill is allowed 0.4 of the
    # time left, so it must start by 3 - 1.5 / 0.4 = -0.75 s: it cannot be placed even now
    q: FlowQueue[str] = FlowQueue(FlowPolicy(band_headroom=0.4))
    never = q.offer(_item(q, "never", band=1, slo=3.0, service_s=1.5), 0.0)
    assert (never.queued, never.reason) == (False, "deadline")
    # 0.8 s of prefill: latest start 3 - 0.8 / 0.4 = 1.0 s; it expires after that
    assert q.offer(_item(q, "fits", band=1, slo=3.0, service_s=0.8), 0.0).queued
    assert q.expire(0.9) == []
    assert [i.payload for i in q.expire(1.1)] == ["fits"]
    # the top band keeps its whole time left
    assert q.offer(_item(q, "top", band=0, slo=3.0, service_s=1.5), 0.0).queued


def test_fifo_keeps_arrival_order() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="fifo"))
    q.offer(_item(q, "first", arrival=0.0, slo=9.0), 0.0)
    q.offer(_item(q, "second", arrival=0.1, slo=1.0), 0.1)
    assert _drain(q, 0.2) == ["first", "second"]


def test_sjf_takes_the_cheapest_first_across_tenants() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="sjf"))
    q.offer(_item(q, "long", tenant="a", arrival=0.0, slo=9.0, tokens=4000), 0.0)
    q.offer(_item(q, "short", tenant="b", arrival=0.2, slo=9.0, tokens=100), 0.2)
    q.offer(_item(q, "middle", tenant="a", arrival=0.1, slo=9.0, tokens=900), 0.2)
    q.offer(_item(q, "tiny", tenant="c", arrival=0.3, slo=9.0, tokens=50), 0.3)
    assert _drain(q, 0.3) == ["tiny", "short", "middle", "long"]


def test_a_higher_band_goes_first_and_a_stalled_band_blocks_lower_ones() -> None:
    q: FlowQueue[str] = FlowQueue()
    q.offer(_item(q, "batch", band=1, slo=100.0), 0.0)
    q.offer(_item(q, "top", band=0, slo=100.0), 0.0)
    seen = []
    for item in q.candidates():
        seen.append(item.payload)  # the caller cannot place it: stops asking
    assert seen == ["top"]
    assert _drain(q, 0.0) == ["top", "batch"]


def test_tenants_share_dispatches_by_credit_charged_by_cost() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(credit_shares={"big": 0.75, "small": 0.25}))
    for i in range(40):
        q.offer(_item(q, f"big{i}", tenant="big", arrival=i * 1e-3, slo=100.0), 0.0)
        q.offer(_item(q, f"small{i}", tenant="small", arrival=i * 1e-3, slo=100.0), 0.0)
    first = _drain(q, 0.0, limit=40)
    bigs = sum(name.startswith("big") for name in first)
    assert 28 <= bigs <= 32  # 3:1 by credit, not arrival order or deadline alone
    # cost counts: a tenant sending 4× longer prompts gets ~4× fewer dispatches
    q2: FlowQueue[str] = FlowQueue()
    for i in range(40):
        q2.offer(_item(q2, f"long{i}", tenant="long", tokens=400, slo=100.0), 0.0)
        q2.offer(_item(q2, f"short{i}", tenant="short", tokens=100, slo=100.0), 0.0)
    first = _drain(q2, 0.0, limit=25)
    assert sum(n.startswith("short") for n in first) == 20


def test_a_callers_price_replaces_the_weighted_tokens() -> None:
    """Priced in GPU-seconds, a reasoning request (56-token prompt, 980-token answer) costs
    several code completions (2,048-token prompt, 28-token answer): the code tenant is served
    that many times per reasoning request — in weighted tokens they would alternate."""
    from serving.admission.cost import gpu_rates

    rates = gpu_rates("H100-SXM", "llama-3-8b", 1)
    q: FlowQueue[str] = FlowQueue()
    for i in range(60):
        for tenant, prompt, output in (("reasoning", 56, 980), ("code", 2_048, 28)):
            item = q.make(
                f"{tenant}{i}",
                tenant=tenant,
                band=0,
                arrival=0.0,
                ttft_slo_s=100.0,
                input_tokens=prompt,
                output_tokens=output,
                cost=rates.request(prompt, 0, output),
            )
            q.offer(item, 0.0)
    first = _drain(q, 0.0, limit=40)
    ratio = rates.request(56, 0, 980) / rates.request(2_048, 0, 28)
    code = sum(n.startswith("code") for n in first)
    assert code / (40 - code) == pytest.approx(ratio, rel=0.3)


def test_edf_ignores_tenants() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="edf"))
    for i in range(5):
        q.offer(_item(q, f"a{i}", tenant="a", arrival=i, slo=1.0), 0.0)
    q.offer(_item(q, "b", tenant="b", arrival=10, slo=1.0), 0.0)
    assert _drain(q, 0.0)[-1] == "b"


def test_a_returning_tenant_banks_no_credit() -> None:
    q: FlowQueue[str] = FlowQueue()
    for i in range(20):
        q.offer(_item(q, f"a{i}", tenant="a", arrival=i, slo=100.0), 0.0)
    _drain(q, 0.0, limit=10)  # a alone: its counter grows
    for i in range(10):
        q.offer(_item(q, f"b{i}", tenant="b", arrival=i, slo=100.0), 0.0)
    nxt = _drain(q, 0.0, limit=10)
    # b is lifted to a's counter: they alternate instead of b taking the next ten
    assert 4 <= sum(n.startswith("b") for n in nxt) <= 6


def test_refused_at_the_door_deadline_share_full() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(max_queued=10, tenant_floor=0.2))
    late = q.offer(_item(q, "late", arrival=0.0, slo=1.0, service_s=0.5), 0.6)
    assert (late.queued, late.reason) == (False, "deadline")
    assert late.retry_after_s >= 1
    assert q.offer(_item(q, "a0", slo=9), 0.0).queued
    assert q.offer(_item(q, "a1", slo=9), 0.0).queued
    share = q.offer(_item(q, "a2", slo=9), 0.0)  # floor 0.2 × 10 = 2
    assert (share.queued, share.reason) == (False, "queue_share")
    for i in range(8):
        assert q.offer(_item(q, f"t{i}", tenant=f"t{i}", slo=9), 0.0).queued
    full = q.offer(_item(q, "x", tenant="x", slo=9), 0.0)
    assert (full.queued, full.reason) == (False, "queue_full")
    assert q.waiting == 10


def test_credit_share_is_read_live() -> None:
    shares = {"a": 0.0}
    q: FlowQueue[str] = FlowQueue(
        FlowPolicy(max_queued=10, tenant_floor=0.1), credit_share=lambda t: shares.get(t, 0.0)
    )
    assert q.offer(_item(q, "a0", slo=9), 0.0).queued
    assert not q.offer(_item(q, "a1", slo=9), 0.0).queued
    shares["a"] = 0.5
    assert q.offer(_item(q, "a1", slo=9), 0.0).queued


def test_expiry_and_removal_take_requests_out_at_once() -> None:
    q: FlowQueue[str] = FlowQueue()
    soon = _item(q, "soon", slo=1.0, service_s=0.2)
    later = _item(q, "later", slo=5.0)
    gone = _item(q, "gone", tenant="b", band=1, slo=5.0)
    for it in (soon, later, gone):
        assert q.offer(it, 0.0).queued
    assert q.lengths == {("a", 0): 2, ("b", 1): 1}
    assert q.next_expiry() == pytest.approx(0.8)
    assert q.remove(gone)
    assert not q.remove(gone)
    assert q.lengths == {("a", 0): 2}
    assert q.expire(0.7) == []
    assert [i.payload for i in q.expire(0.81)] == ["soon"]
    assert q.waiting == 1 and q.waiting_above(1) == 1
    assert _drain(q, 1.0) == ["later"]
    assert q.waiting == 0 and q.lengths == {} and q.next_expiry() is None


def test_retry_after_follows_the_dispatch_rate() -> None:
    q: FlowQueue[str] = FlowQueue()
    for i in range(200):
        q.offer(_item(q, f"r{i}", tenant=f"t{i % 10}", arrival=0.0, slo=1000.0), 0.0)
    for k, item in enumerate(q.candidates()):
        q.dispatched(item, k * 0.1)  # 10 per second
        if k == 99:
            break
    # 100 still waiting at ~10/s: about ten seconds
    assert 5 <= q.retry_after_s(0) <= 20


def test_bad_policy_names_the_field() -> None:
    with pytest.raises(InputError, match="order"):
        FlowPolicy(order="random")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="backfill"):
        FlowPolicy(backfill=-1)
    with pytest.raises(InputError, match="deadline_slack"):
        FlowPolicy(deadline_slack=0)


def test_lifo_serves_the_newest_first() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="lifo"))
    for name, arrival in (("old", 0.0), ("new", 0.2), ("mid", 0.1)):
        assert q.offer(_item(q, name, arrival=arrival, slo=5.0), 0.2).queued
    assert _drain(q, 0.3) == ["new", "mid", "old"]


def _place_only(q: FlowQueue[str], fits: set[str]) -> tuple[list[str], list[str]]:
    """Pump as a caller does: place the candidates in ``fits``, ask again after a refusal.
    What was offered, and what was placed."""
    offered: list[str] = []
    for item in q.candidates():
        offered.append(item.payload)
        if item.payload in fits:
            q.dispatched(item, 1.0)
    return offered, [p for p in offered if p in fits]


def _blocked(backfill: int) -> FlowQueue[str]:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="fifo", backfill=backfill))
    for k, name in enumerate(("long", "s1", "s2", "s3")):
        q.offer(_item(q, name, tenant="ab"[k % 2], arrival=k * 0.1, slo=5.0), 0.5)
    q.offer(_item(q, "low", band=1, arrival=0.0, slo=5.0), 0.5)
    return q


def test_without_backfill_a_band_waits_for_its_head() -> None:
    q = _blocked(0)
    assert _place_only(q, {"s1", "s2", "s3", "low"}) == (["long"], [])
    assert q.waiting == 5 and not q.may_place_at_once(0) and q.may_place_at_once(-1)


def test_backfill_offers_the_next_ones_of_the_band_in_order_and_no_lower_band() -> None:
    q = _blocked(2)
    offered, placed = _place_only(q, {"s1", "s2", "s3", "low"})
    assert offered == ["long", "s1", "s2"] and placed == ["s1", "s2"]
    assert q.lengths == {("a", 0): 1, ("b", 0): 1, ("a", 1): 1}
    # the head still comes first next time; a new arrival of its band may try at once
    assert _place_only(q, {"long"}) == (["long", "s3"], ["long"])
    assert q.may_place_at_once(0) and not q.may_place_at_once(1)


def test_backfill_stops_at_what_waits() -> None:
    q = _blocked(16)
    assert _place_only(q, set())[0] == ["long", "s1", "s2", "s3"]


def test_requests_that_left_from_inside_a_heap_are_dropped_in_time() -> None:
    q: FlowQueue[str] = FlowQueue(FlowPolicy(order="lifo"))
    for k in range(500):  # under lifo the oldest expire from the bottom of the heap
        q.offer(_item(q, f"r{k}", arrival=k * 0.01, slo=1.0), k * 0.01)
        q.expire(k * 0.01)
    assert q.waiting == 101
    assert _drain(q, 5.0, limit=1) == ["r499"]
    heap = q._bands[0].tenants["a"]  # the tenant's heap holds the waiting and a bounded rest
    assert len(heap) <= 2 * q.waiting + 64
