from __future__ import annotations

import json
from typing import Any

import pytest

from placement.errors import InputError
from placement.plan import PLAN_SCHEMA, Plan


def _plan_dict() -> dict[str, Any]:
    return {
        "schema": PLAN_SCHEMA,
        "version": 3,
        "created_at": 1.0,
        "fleet": "h100x8",
        "inputs_digest": "abc",
        "capacity_source": "roofline-prior",
        "solver": {
            "backend": "cp-sat",
            "status": "optimal",
            "objective": 10.0,
            "bound": 10.2,
            "gap": 0.02,
            "solve_s": 0.5,
            "time_limit_s": 10.0,
        },
        "replicas": [
            {
                "id": "h100-0",
                "kind": "h100",
                "accelerator": "H100-SXM",
                "model": "llama-3-8b",
                "load_cap_rps": 4.0,
                "planned_rps": 3.0,
                "kv_budget_tokens": 100000,
                "warm_prefix_tokens": 2048,
            }
        ],
        "groups": [
            {
                "key": (1 << 62) + 5,
                "depth_blocks": 4,
                "tenant": "a",
                "model": "llama-3-8b",
                "rate_rps": 2.0,
                "prefix_tokens": 2048,
                "route": {"replicas": ["h100-0"], "weights": [1.0]},
                "warm": ["h100-0"],
            }
        ],
        "defaults": [
            {
                "tenant": "a",
                "model": "llama-3-8b",
                "route": {"replicas": ["h100-0"], "weights": [1.0]},
            }
        ],
    }


def test_round_trip_keeps_every_field() -> None:
    plan = Plan.from_dict(_plan_dict())
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert again.groups[0].key == (1 << 62) + 5
    assert json.loads(plan.to_json())["schema"] == PLAN_SCHEMA


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(schema="placement.plan/v0"), "schema"),
        (lambda d: d.update(version=0), "version"),
        (lambda d: d["groups"][0]["route"].update(weights=[0.5]), "groups.0.route"),
        (lambda d: d["groups"][0].update(key=-1), "groups.0.key"),
        (lambda d: d["solver"].update(status="great"), "solver.status"),
        (lambda d: d.update(surprise=1), "surprise"),
    ],
)
def test_off_schema_is_refused_naming_the_field(mutate: Any, field: str) -> None:
    raw = _plan_dict()
    mutate(raw)
    with pytest.raises(InputError) as err:
        Plan.from_dict(raw, source="p.json")
    assert err.value.field == field
    assert "p.json" in str(err.value)


def test_bad_json_names_the_line() -> None:
    with pytest.raises(InputError) as err:
        Plan.from_json('{\n"schema": ', source="p.json")
    assert err.value.line == 2


def test_json_schema_is_exported() -> None:
    schema = Plan.json_schema()
    assert "solver" in schema["properties"]
