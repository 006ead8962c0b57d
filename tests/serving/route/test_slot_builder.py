"""Slotted dataclasses built on the hot path (serving.route.slot_builder) are the objects their
constructors build: equal, of the same class, frozen when the class is, defaults filled in."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from serving.route.decision import make_decision
from serving.route.query import make_query
from serving.route.slot_builder import slot_builder
from serving.route.types import Decision, ReplicaState, RouteQuery
from serving.service import Routed, _make_routed

QUERY = RouteQuery(
    tenant="t", model="m", request_class="c", block_hashes=(1, 2), input_tokens=9,
    max_output_tokens=3,
)  # fmt: skip


def test_a_query_as_its_constructor_builds_it_defaults_included() -> None:
    built = make_query("t", "m", "c", (1, 2), 9, 3)
    assert type(built) is RouteQuery
    assert built == QUERY
    assert hash(built) == hash(QUERY)
    assert built.ttft_budget_s is None and built.adapter == "" and built.priority == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.tenant = "other"  # type: ignore[misc]


def test_every_field_positionally_in_declaration_order() -> None:
    decision = make_decision("r", "a:1", "plan", 4, 0.5, ("s",), 7, 0.25, 2)
    assert decision == Decision(
        replica_id="r", address="a:1", reason="plan", plan_version=4, predicted_ttft_s=0.5,
        fallbacks=("s",), cached_tokens=7, slot_wait_s=0.25, slot_handovers=2,
    )  # fmt: skip
    routed = _make_routed("d-1", decision, ("r",), ("a:1",), None)
    assert routed == Routed(
        decision_id="d-1", decision=decision, replica_ids=("r",), addresses=("a:1",)
    )


def test_a_missing_field_is_refused_as_by_the_constructor() -> None:
    with pytest.raises(TypeError):
        make_query("t", "m", "c", (1,), 9)  # type: ignore[call-arg]


def test_classes_it_cannot_build_exactly_are_refused() -> None:
    @dataclass
    class NoSlots:
        x: int

    @dataclass(slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("x")

    @dataclass(slots=True)
    class Factory:
        xs: list[int] = field(default_factory=list)

    for cls in (NoSlots, Checked, Factory, ReplicaState):
        with pytest.raises(TypeError):
            slot_builder(cls)
