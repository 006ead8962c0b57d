"""A small valid plan to build tests on (imported by name; tests/ is on sys.path)."""

from __future__ import annotations

from typing import Any

from placement.domain.fleet import fleet_from_dict
from placement.plan.schema import Plan


def make_plan(**changes: Any) -> Plan:
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
