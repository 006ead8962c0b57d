from __future__ import annotations

import pytest

from placement.domain.requests import RequestClass
from placement.errors import InputError
from serving.admission import AdmissionController, class_budgets

CLASSES = (
    RequestClass(name="interactive", priority=0, ttft_slo_s=2, tpot_slo_s=0.1, sheddable=False),
    RequestClass(name="standard", priority=1, ttft_slo_s=5, tpot_slo_s=0.2, sheddable=True),
    RequestClass(name="batch", priority=2, ttft_slo_s=30, tpot_slo_s=0.3, sheddable=True),
)


def controller(fleet: int = 10, soft: float = 0.5) -> AdmissionController:
    return AdmissionController(
        classes=class_budgets(CLASSES, fleet_in_flight=fleet),
        fleet_in_flight=fleet,
        soft_fraction=soft,
    )


def fill(ac: AdmissionController, n: int, cls: str = "interactive", tenant: str = "t") -> None:
    for _ in range(n):
        assert ac.admit(tenant, cls, 10).admitted


def test_everything_is_admitted_below_the_soft_mark() -> None:
    ac = controller()
    fill(ac, 4, "batch")
    assert ac.admit("t", "batch", 10).admitted
    assert ac.in_flight == 5


def test_at_the_budget_sheddable_work_is_refused_with_retry_after() -> None:
    ac = controller()
    fill(ac, 10)
    verdict = ac.admit("t", "batch", 10)
    assert not verdict.admitted
    assert verdict.reason == "saturated"
    assert verdict.retry_after_s >= 1


def test_lowest_priority_is_shed_first() -> None:
    ac = controller(fleet=10, soft=0.5)
    fill(ac, 8)  # pressure 0.6
    assert ac.check("t", "standard").admitted
    assert not ac.check("t", "batch").admitted


def test_tenant_furthest_over_credit_is_shed_first() -> None:
    ac = controller(fleet=10, soft=0.5)
    fill(ac, 1, "interactive", tenant="light")
    fill(ac, 1, "interactive", tenant="heavy")
    ac.vtc.charge("heavy", prefill_tokens=10_000, decode_tokens=0)
    fill(ac, 6)  # 8 in flight: pressure 0.6
    assert not ac.check("heavy", "standard").admitted
    assert ac.check("light", "standard").admitted


def test_non_sheddable_never_shed_while_sheddable_in_flight() -> None:
    ac = controller(fleet=4)
    fill(ac, 2, "batch")
    fill(ac, 2)
    # at and beyond the budget: batch refused, interactive still admitted
    assert not ac.check("t", "batch").admitted
    fill(ac, 3)
    assert ac.in_flight == 7


def test_non_sheddable_refused_at_the_budget_with_no_sheddable_in_flight() -> None:
    ac = controller(fleet=4)
    fill(ac, 4)
    verdict = ac.admit("t", "interactive", 10)
    assert not verdict.admitted and verdict.reason == "saturated"


def test_class_budget_bounds_a_class() -> None:
    ac = AdmissionController(
        classes=class_budgets(CLASSES, fleet_in_flight=10, fraction=0.2),
        fleet_in_flight=10,
    )
    fill(ac, 2, "batch")
    verdict = ac.admit("t", "batch", 10)
    assert not verdict.admitted and verdict.reason == "class_full"
    assert ac.admit("t", "standard", 10).admitted


def test_release_frees_the_budget_and_lower_priorities_wait_longer() -> None:
    ac = controller(fleet=2)
    fill(ac, 2)
    refused_std = ac.check("t", "standard")
    refused_batch = ac.check("t", "batch")
    assert refused_batch.retry_after_s > refused_std.retry_after_s
    ac.release("t", "interactive", 5)
    ac.release("t", "interactive", 5)
    assert ac.in_flight == 0
    assert ac.admit("t", "batch", 10).admitted


def test_unknown_class_names_the_known_ones() -> None:
    with pytest.raises(InputError, match="interactive"):
        controller().admit("t", "gold", 1)


def test_fleet_capacity_rescales_class_budgets() -> None:
    ac = AdmissionController(
        classes=class_budgets(CLASSES, fleet_in_flight=10, fraction=0.5), fleet_in_flight=10
    )
    ac.set_fleet_capacity(20)
    assert ac.classes["batch"].max_in_flight == 10


# --- tenants' entitlements ----------------------------------------------------------------


def credited(fleet: int = 100, **shares: float) -> AdmissionController:
    return AdmissionController(
        classes=class_budgets(CLASSES, fleet_in_flight=fleet),
        fleet_in_flight=fleet,
        credit_shares=shares,
    )


def admitted(ac: AdmissionController, tenant: str, n: int, now: float = 0.0) -> int:
    return sum(ac.admit(tenant, "interactive", 10, now).admitted for _ in range(n))


def test_entitlement_is_the_credit_share_with_a_floor_for_anyone() -> None:
    ac = credited(100, b=0.3)
    assert ac.tenant_floor() == 5
    assert ac.entitlement("b") == 30
    assert ac.entitlement("never-seen") == 5


def test_a_flooding_tenant_leaves_an_active_credited_tenant_its_share() -> None:
    ac = credited(100, b=0.3)
    assert admitted(ac, "b", 1) == 1  # b is active
    assert admitted(ac, "a", 500) == 100 - 30  # a may not borrow b's unused 29
    assert ac.check("a", "interactive").reason == "over_credit"
    assert admitted(ac, "b", 29) == 29  # b is never refused within its credit
    assert admitted(ac, "c", 5) == 5  # a newcomer gets its floor, past the full fleet
    assert ac.in_flight == 105
    assert not ac.check("c2", "interactive").admitted  # … but no further than the floor


def test_owed_requests_are_not_shed_even_under_pressure() -> None:
    ac = credited(100, b=0.3)
    admitted(ac, "b", 1)
    admitted(ac, "a", 69)  # utilisation 0.7, past the soft mark
    ac.vtc.charge("b", prefill_tokens=10**9, decode_tokens=0)  # b far over in tokens served
    assert ac.admit("b", "batch", 10).admitted


def test_a_lone_tenant_may_still_use_the_whole_fleet() -> None:
    ac = credited(100, b=0.3)
    assert admitted(ac, "a", 200) == 100  # b never asked: nothing is claimed
    assert ac.check("a", "interactive").reason == "saturated"


def test_an_idle_credited_tenant_lends_its_share_and_reclaims_it_on_return() -> None:
    ac = credited(100, b=0.3)
    admitted(ac, "b", 1, now=0.0)
    ac.release("b", "interactive", 1)
    # b idle for longer than active_s: a may borrow everything
    assert admitted(ac, "a", 100, now=ac.active_s + 1) == 100
    # b returns: owed, it gets the floor at once, and a borrows no more
    t = ac.active_s + 2
    assert admitted(ac, "b", 10, now=t) == 5
    for _ in range(40):
        ac.release("a", "interactive", 1)
    # a (60 in flight) may take back only what leaves b's claim (30 − 5) free
    assert admitted(ac, "a", 40, now=t) == 100 - 65 - 25
    assert admitted(ac, "b", 40, now=t) == 25  # b fills its entitlement of 30


def test_releases_forget_tenants_with_nothing_in_flight() -> None:
    ac = credited(100)
    for i in range(50):
        assert ac.admit(f"t{i}", "interactive", 1).admitted
        ac.release(f"t{i}", "interactive", 1)
    assert ac.in_flight_by_tenant == {}


def test_credit_shares_over_one_are_scaled_down() -> None:
    ac = credited(100, a=0.8, b=0.8)
    assert ac.credit_share("a") == pytest.approx(0.5)
    assert ac.entitlement("b") == 50


def test_without_the_bound_one_tenant_locks_everyone_out() -> None:
    ac = credited(100, b=0.3)
    ac.bound_tenants = False
    admitted(ac, "b", 1)
    assert admitted(ac, "a", 500) == 99
    assert not ac.check("b", "interactive").admitted
    assert not ac.check("c", "interactive").admitted


def test_with_rates_credits_are_charged_in_gpu_seconds() -> None:
    from serving.admission.cost import gpu_rates

    rates = gpu_rates("H100-SXM", "llama-3-8b", 1)
    ac = controller()
    ac.set_rates(rates)
    assert ac.admit("a", "interactive", 2_048).admitted
    ac.release("a", "interactive", 28, 2_048)
    assert ac.vtc.counters["a"] == pytest.approx(rates.request(2_048, 0, 28))
    tokens = controller()
    assert tokens.admit("a", "interactive", 2_048).admitted
    tokens.release("a", "interactive", 28)
    assert tokens.vtc.counters["a"] == pytest.approx(2_048 + 2 * 28)
