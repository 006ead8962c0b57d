from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "api"))
from api_fakes import make_plan

from placement.errors import PlanRejected
from placement.plan import DefaultRoute, Plan, ReplicaPlan, Route, TenantPlan
from serving.plan_guard import check_replacement, emptiness, replacement_problems

REGISTERED = {"a0": "llama-3-8b", "a1": "llama-3-8b", "q0": "qwen2.5-32b"}


def plan(
    version: int,
    *,
    replicas: dict[str, str] | None = None,
    planned_rps: float = 2.0,
    tenants: tuple[str, ...] = ("acme",),
    share: float = 0.5,
) -> Plan:
    """A plan over ``replicas`` (id → model; default: every registered one), each tenant
    routed by default to the replicas of each model."""
    on = REGISTERED if replicas is None else replicas
    models = sorted(set(on.values()))
    base = make_plan(version)
    return base.model_copy(
        update={
            "replicas": tuple(
                ReplicaPlan(
                    id=rid,
                    kind=model,
                    accelerator="H100-SXM",
                    model=model,
                    load_cap_rps=10.0,
                    planned_rps=planned_rps,
                    kv_budget_tokens=1000,
                    warm_prefix_tokens=0,
                )
                for rid, model in on.items()
            ),
            "defaults": tuple(
                DefaultRoute(
                    tenant=t,
                    model=m,
                    route=Route(
                        replicas=tuple(r for r, rm in on.items() if rm == m),
                        weights=_even(sum(rm == m for rm in on.values())),
                    ),
                )
                for t in tenants
                for m in models
            ),
            "tenants": tuple(
                TenantPlan(
                    tenant=t,
                    demand_rps=1.0,
                    admitted_rps=1.0,
                    guaranteed_share=share,
                    cap_share=share,
                )
                for t in tenants
            ),
        }
    )


def _even(n: int) -> tuple[float, ...]:
    weights = [1.0 / n] * (n - 1)
    return (*weights, 1.0 - sum(weights))


GOOD = plan(5)


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (plan(6), None),
        (plan(6, replicas={}, tenants=()), "no replica"),
        (plan(6, tenants=()), "no tenant"),
        (plan(6, planned_rps=0.0), "0 planned req/s"),
        (plan(6, share=0.0), "every tenant's share is 0"),
    ],
)
def test_emptiness(candidate: Plan, expected: str | None) -> None:
    assert emptiness(candidate) == expected


@pytest.mark.parametrize(
    ("candidate", "installed", "registered", "refused_for"),
    [
        # a valid plan over the same fleet replaces the installed one
        (plan(6), GOOD, REGISTERED, None),
        # transient conditions: an empty plan never replaces a non-empty one...
        (plan(6, tenants=()), GOOD, REGISTERED, "empty plan (no tenant)"),
        (plan(6, planned_rps=0.0), GOOD, REGISTERED, "empty plan (0 planned req/s)"),
        (plan(6, share=0.0), GOOD, REGISTERED, "every tenant's share is 0"),
        (plan(6, replicas={}, tenants=()), GOOD, REGISTERED, "empty plan (no replica)"),
        # ...but with no plan installed it makes a fresh service ready
        (plan(6, tenants=()), None, REGISTERED, None),
        # replica loss: a lost replica is planned around
        (plan(6, replicas={"a0": "llama-3-8b", "q0": "qwen2.5-32b"}), GOOD, REGISTERED, None),
        # a whole pool lost while still registered: the installed plan stays
        (
            plan(6, replicas={"a0": "llama-3-8b", "a1": "llama-3-8b"}),
            GOOD,
            REGISTERED,
            "drops the qwen2.5-32b pool",
        ),
        # a pool retired on purpose (its replicas deregistered) may go
        (
            plan(6, replicas={"a0": "llama-3-8b", "a1": "llama-3-8b"}),
            GOOD,
            {"a0": "llama-3-8b", "a1": "llama-3-8b"},
            None,
        ),
        # valid for the fleet: no route to a replica that is not registered
        (plan(6), GOOD, {"a0": "llama-3-8b", "q0": "qwen2.5-32b"}, "which the fleet does not have"),
        # forward only
        (plan(5), GOOD, REGISTERED, "not above the installed 5"),
    ],
)
def test_replacement_policy(
    candidate: Plan, installed: Plan | None, registered: dict[str, str], refused_for: str | None
) -> None:
    found = replacement_problems(candidate, installed, replicas=registered)
    if refused_for is None:
        assert found == []
        check_replacement(candidate, installed, replicas=registered)
    else:
        assert any(refused_for in p for p in found), found
        with pytest.raises(PlanRejected, match="may not replace"):
            check_replacement(candidate, installed, replicas=registered)
