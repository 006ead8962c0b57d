from __future__ import annotations

from typing import Any

import pytest

from placement.domain.fleet import fleet_from_dict
from placement.errors import PlanRejected
from placement.plan.schema import Plan
from placement.plan.validate import problems, validate


def _plan(**changes: Any) -> Plan:
    raw: dict[str, Any] = {
        "schema": "placement.plan/v1",
        "version": 1,
        "created_at": 1.0,
        "fleet": "f",
        "inputs_digest": "x",
        "capacity_source": "roofline-prior",
        "solver": {
            "backend": "mathopt-highs",
            "status": "optimal",
            "objective": 1.0,
            "bound": 1.0,
            "gap": 0.0,
            "solve_s": 0.1,
            "time_limit_s": 1.0,
        },
        "replicas": [
            {
                "id": "h100-0",
                "kind": "h100",
                "accelerator": "H100-SXM",
                "model": "llama-3-8b",
                "load_cap_rps": 10.0,
                "planned_rps": 8.0,
                "kv_budget_tokens": 1000,
                "warm_prefix_tokens": 0,
            },
            {
                "id": "h100-1",
                "kind": "h100",
                "accelerator": "H100-SXM",
                "model": "llama-3-8b",
                "load_cap_rps": 10.0,
                "planned_rps": 2.0,
                "kv_budget_tokens": 1000,
                "warm_prefix_tokens": 0,
            },
        ],
        "groups": [
            {
                "key": 5,
                "depth_blocks": 1,
                "tenant": "a",
                "model": "llama-3-8b",
                "rate_rps": 2.0,
                "prefix_tokens": 512,
                "route": {"replicas": ["h100-1"], "weights": [1.0]},
            }
        ],
        "defaults": [
            {
                "tenant": "a",
                "model": "llama-3-8b",
                "route": {"replicas": ["h100-0"], "weights": [1.0]},
            }
        ],
        "tenants": [
            {
                "tenant": "a",
                "demand_rps": 10.0,
                "admitted_rps": 10.0,
                "guaranteed_share": 0.5,
                "cap_share": 1.0,
                "guaranteed_rps": 5.0,
                "cap_rps": 20.0,
            }
        ],
    }
    for path, value in changes.items():
        node = raw
        *head, last = path.split(".")
        for p in head:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return Plan.from_dict(raw)


FLEET = fleet_from_dict(
    {
        "name": "f",
        "replicas": [
            {"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"}
        ],
    }
)


def test_a_good_plan_passes() -> None:
    plan = _plan()
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
    found = problems(_plan(**changes))
    assert any(expected in p for p in found), found
    with pytest.raises(PlanRejected, match="rejected"):
        validate(_plan(**changes))


def test_unhealthy_and_unknown_replicas_are_coverage_problems() -> None:
    assert any("h100-1" in p for p in problems(_plan(), unhealthy=["h100-1"]))
    small = fleet_from_dict(
        {
            "name": "f",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
            ],
        }
    )
    assert any(
        "does not have" in p or "not in the fleet" in p for p in problems(_plan(), fleet=small)
    )
