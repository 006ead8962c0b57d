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
