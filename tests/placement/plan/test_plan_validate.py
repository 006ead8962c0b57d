from __future__ import annotations

from typing import Any

import pytest
from plan_builders import FLEET, make_plan

from placement.domain.fleet import fleet_from_dict
from placement.errors import PlanRejected
from placement.plan.validate import problems, validate


def test_a_good_plan_passes() -> None:
    plan = make_plan()
    assert problems(plan, fleet=FLEET) == []
    assert validate(plan) is plan


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"replicas.0.planned_rps": 12.0}, "capacity: h100-0"),
        ({"groups.0.route.replicas": ["h100-9"]}, "not a healthy replica"),
        ({"groups.0.model": "qwen2.5-32b"}, "serves llama-3-8b"),
        ({"defaults": []}, "no default route"),
        ({"tenants.0.admitted_rps": 4.0}, "below its guaranteed"),
        ({"tenants.0.cap_rps": 6.0}, "above its cap"),
        ({"tenants.0.admitted_rps": 11.0, "tenants.0.cap_rps": 30.0}, "more than its demand"),
    ],
)
def test_each_violation_is_caught(changes: dict[str, Any], expected: str) -> None:
    found = problems(make_plan(**changes))
    assert any(expected in p for p in found), found
    with pytest.raises(PlanRejected, match="rejected"):
        validate(make_plan(**changes))


def test_unhealthy_and_unknown_replicas_are_coverage_problems() -> None:
    assert any("h100-1" in p for p in problems(make_plan(), unhealthy=["h100-1"]))
    small = fleet_from_dict(
        {
            "name": "f",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
            ],
        }
    )
    assert any(
        "does not have" in p or "not in the fleet" in p for p in problems(make_plan(), fleet=small)
    )
