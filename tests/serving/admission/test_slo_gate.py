from __future__ import annotations

import pytest

from placement.domain.requests import DEFAULT_CLASSES
from placement.errors import InputError
from serving.admission.slo_gate import SloGate


def test_refuses_past_the_class_ttft_slo() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert gate.admit("a", "interactive", 1.9)
    assert not gate.admit("a", "interactive", 2.1)
    assert gate.refused[("a", "interactive")] == 1
    # batch: 30 s SLO but sheddable, so refused at half of it
    assert gate.admit("a", "batch", 14.0) and not gate.admit("a", "batch", 16.0)


def test_tenants_over_their_credit_are_refused_first() -> None:
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.5)
    gate.set_credits({"owed": 0.5, "greedy": 0.5})
    gate.started("owed", 100)
    gate.started("greedy", 100_000)  # far over its share now
    assert gate.limit_s("greedy", "interactive") < gate.limit_s("owed", "interactive")
    assert gate.admit("owed", "interactive", 1.5)
    assert not gate.admit("greedy", "interactive", 1.5)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"headroom": 0}, "headroom"),
        ({"credit_cut": 1.0}, "credit_cut"),
        ({"shed_factor": 0}, "shed_factor"),
        ({"tpot_headroom": 0}, "tpot_headroom"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InputError) as info:
        SloGate(DEFAULT_CLASSES, **kwargs)
    assert info.value.field == field


def test_unknown_class_names_the_field() -> None:
    with pytest.raises(InputError) as info:
        SloGate(DEFAULT_CLASSES).admit("a", "bulk", 0.1)
    assert info.value.field == "request_class"


def test_sheddable_work_yields_while_interactive_requests_are_refused() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    gate.set_credits({"bulk": 0.1, "chat": 0.9})
    gate.started("chat", 100)
    gate.started("bulk", 50_000)  # bulk is furthest over its credit
    assert gate.admit("bulk", "batch", 1.0)  # no pressure yet: a batch request fits its SLO
    for _ in range(200):
        gate.admit("chat", "interactive", 5.0)  # the fleet refuses interactive work
    assert gate.pressure > 0.9
    assert not gate.admit("bulk", "batch", 1.0)
    for _ in range(400):
        gate.admit("chat", "interactive", 0.5)  # pressure gone
    assert gate.pressure < 0.01 and gate.admit("bulk", "batch", 1.0)


def test_under_pressure_interactive_tenants_over_credit_yield_to_those_owed() -> None:
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0)
    gate.set_credits({"heavy": 0.5, "owed": 0.5})
    gate.started("owed", 100)
    gate.started("heavy", 100_000)
    for _ in range(200):
        gate.admit("x", "interactive", 5.0)  # SLO refusals build the pressure
    assert gate.pressure > 0.9
    assert gate.admit("owed", "interactive", 0.5)
    assert not gate.admit("heavy", "interactive", 0.5)  # fits its SLO, but is over credit
