from __future__ import annotations

import pytest

from serving.admission import TokenWeights, VirtualTokenCounter


def test_prefill_and_decode_are_weighted_and_normalised_by_credit_weight() -> None:
    vtc = VirtualTokenCounter(
        credit_weights={"big": 2.0}, token_weights=TokenWeights(prefill=1.0, decode=3.0)
    )
    vtc.charge("big", prefill_tokens=100, decode_tokens=10)
    vtc.charge("small", prefill_tokens=100, decode_tokens=10)
    assert vtc.counters["big"] == pytest.approx((100 + 30) / 2)
    assert vtc.counters["small"] == pytest.approx(130)


def test_idle_tenant_is_lifted_to_the_minimum_of_the_active() -> None:
    vtc = VirtualTokenCounter()
    vtc.charge("c", prefill_tokens=50, decode_tokens=0)  # c was served a little, long ago
    vtc.start("a", 1000)
    vtc.start("b", 500)  # lifted to a's 1000 first
    assert vtc.counters["b"] == pytest.approx(1500)
    # c comes back after a long absence: it may not claim the credit it did not use
    assert vtc.counter("c") == pytest.approx(1000)
    vtc.start("c", 10)
    assert vtc.counters["c"] == pytest.approx(1010)


def test_lift_never_lowers_a_counter() -> None:
    vtc = VirtualTokenCounter()
    vtc.start("b", 10)
    vtc.start("a", 5000)  # lifted to 10 first
    vtc.finish("a", 0)
    assert vtc.counter("a") == pytest.approx(5010)


def test_with_nobody_active_the_last_to_leave_sets_the_floor() -> None:
    vtc = VirtualTokenCounter()
    vtc.start("a", 300)
    vtc.finish("a", 0)
    assert vtc.counter("fresh") == pytest.approx(300)


def test_over_credit_orders_active_tenants() -> None:
    vtc = VirtualTokenCounter()
    vtc.start("light", 10)
    vtc.start("heavy", 10)
    vtc.charge("heavy", prefill_tokens=1000, decode_tokens=0)
    assert vtc.over_credit("heavy") == pytest.approx(1.0)
    assert vtc.over_credit("light") == pytest.approx(0.0)
    assert 0.0 <= vtc.over_credit("newcomer") <= 1.0


def test_snapshot_and_restore_keep_the_order() -> None:
    vtc = VirtualTokenCounter()
    vtc.start("a", 100)
    vtc.start("b", 400)
    restored = VirtualTokenCounter()
    restored.restore(vtc.snapshot())
    assert restored.counters == {"a": 0.0, "b": 400.0}
    assert not restored.is_active("a")


def test_cost_charges_are_divided_by_credit_weight_and_lift_idle_tenants() -> None:
    vtc = VirtualTokenCounter(credit_weights={"big": 2.0})
    vtc.start_cost("big", 0.4)
    vtc.finish_cost("big", 0.2)
    assert vtc.counters["big"] == pytest.approx(0.3)
    assert not vtc.is_active("big")
    vtc.start_cost("a", 1.0)  # new: lifted to where big left (0.3) first
    vtc.start_cost("small", 0.1)  # new: lifted to a's 1.3 first
    assert vtc.counters["a"] == pytest.approx(1.3)
    assert vtc.counters["small"] == pytest.approx(1.4)


def test_lead_is_how_far_a_tenant_stands_above_the_lowest_active_counter() -> None:
    vtc = VirtualTokenCounter()
    assert vtc.lead("a") == 0.0  # nobody active
    vtc.start_cost("a", 5.0)
    vtc.start_cost("b", 1.0)  # lifted to 5 first: 6
    assert vtc.lead("b") == pytest.approx(1.0)
    assert vtc.lead("a") == 0.0
