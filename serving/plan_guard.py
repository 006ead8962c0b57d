"""Whether a plan may replace the installed one: the planner's acceptance policy.

A plan the solver calls feasible can still be wrong for *now*: solved on a demand window that
a restart emptied, or while every replica was briefly unhealthy. :func:`check_replacement`
holds a plan — a fresh solve's, or one another process published — to four rules, against the
replicas registered when it is about to be installed:

1. **Valid for the fleet** (:mod:`placement.plan.validate`): every route names a registered
   replica serving the route's model, no replica is planned over its load cap, credits hold.
   Health is not checked here: a replica lost during the solve is the route path's to avoid
   (it falls back), and its health change has already asked for a re-solve.
2. **Never empty over non-empty.** A plan with no replica, no tenant, no planned req/s or
   every tenant's share 0 (:func:`emptiness`) never replaces a plan that has them. With no plan
   installed an empty plan is accepted: it makes a fresh service ready, and the first solve
   with demand replaces it.
3. **Replica loss.** A plan may leave out lost replicas (unhealthy or deregistered): the solver
   plans around them. It may not leave out a whole model pool the installed plan serves while
   that pool still has registered replicas: a pool whose every replica is unhealthy is an
   outage to ride out on the installed plan (its routes fall back to a healthy replica of the
   model, or answer 503), not a reason to publish a plan without it. When one of its replicas
   is healthy again, its health change triggers a re-solve. To retire a pool, deregister its
   replicas.
4. **Forward only.** A plan at or below the installed version is refused.

The planner also skips solving altogether (:class:`serving.planner.SolveSkipped`) when the
demand window is empty or no replica is healthy while a plan is installed
(:mod:`serving.planning`); these rules are the net under that.
"""

from __future__ import annotations

from collections.abc import Mapping

from placement.errors import PlanRejected
from placement.plan import Plan
from placement.plan.validate import problems


def emptiness(plan: Plan) -> str | None:
    """Why ``plan`` routes nothing (None: it routes something)."""
    if not plan.replicas:
        return "no replica"
    if not plan.tenants:
        return "no tenant"
    if sum(r.planned_rps for r in plan.replicas) <= 0:
        return "0 planned req/s"
    if all(t.guaranteed_share == 0 and t.cap_share == 0 for t in plan.tenants):
        return "every tenant's share is 0"
    return None


def replacement_problems(
    plan: Plan, installed: Plan | None, *, replicas: Mapping[str, str]
) -> list[str]:
    """Every rule of the module doc that ``plan`` breaks as a replacement of ``installed``,
    ``replicas`` being the registered replicas (id → model)."""
    found = problems(plan, replica_ids=replicas)
    if installed is None:
        return found
    if plan.version <= installed.version:
        found.append(f"version {plan.version} is not above the installed {installed.version}")
    empty = emptiness(plan)
    if empty is not None and emptiness(installed) is None:
        found.append(
            f"empty plan ({empty}) would replace plan {installed.version}, which is not "
            "(an empty demand window after a restart, or every replica briefly unhealthy)"
        )
    kept = {r.model for r in plan.replicas}
    registered = set(replicas.values())
    for model in sorted({r.model for r in installed.replicas} - kept):
        if model in registered:
            found.append(
                f"replica loss: the plan drops the {model} pool, which still has registered "
                "replicas (all unhealthy?); the installed plan stays until one is back"
            )
    return found


def check_replacement(plan: Plan, installed: Plan | None, *, replicas: Mapping[str, str]) -> None:
    """Raise :class:`PlanRejected` naming every broken rule, if any."""
    found = replacement_problems(plan, installed, replicas=replicas)
    if found:
        raise PlanRejected(
            f"plan {plan.version} may not replace "
            + ("no plan" if installed is None else f"plan {installed.version}")
            + ": "
            + "; ".join(found)
        )
