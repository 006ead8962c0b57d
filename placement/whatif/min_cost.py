"""The capacity question: the cheapest fleet, in replicas per candidate accelerator kind, whose
capacity at SLO serves the whole demand.

A Mélange-style integer program (Griggs et al., 2024), with our predictors for the capacities:

- ``n_k`` ∈ [min_k, max_k], integer: replicas of candidate kind ``k``;
- ``x[d,k]`` ∈ [0, 1]: share of demand unit ``d`` (tenant × class × prefix group, as the solver
  aggregates it) served on kind ``k``, only where ``k`` can hold ``d``'s SLO at all;
- every unit fully served, ``Σ_k x[d,k] = 1`` — nothing shed;
- each kind's load within its replicas: ``Σ_d x[d,k] · rate_d / capacity[d,k] ≤ u · n_k``,
  with ``capacity[d,k]`` the capacity at SLO of one replica of ``k`` for ``d`` alone (the same
  table the placement solver reads) and ``u`` the utilisation target;
- minimise ``Σ_k cost_k · n_k`` ($/h).

The answer is then **verified** by solving the placement on that fleet: the plan must shed
nothing. Prefix warmth, KV budgets and credit floors are not in the sizing program, so when the
plan sheds, the utilisation target is lowered by :data:`REPAIR_FACTOR` and the program solved
again (at most :data:`REPAIR_ROUNDS` times); the result says how many rounds it took.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import fleet_from_dict
from placement.errors import InfeasiblePlan, InputError
from placement.solver.instance import FloatArray, Instance
from placement.whatif.accelerators import scenario_accelerators
from placement.whatif.inputs import CaseInputs, capacity_source, case_inputs
from placement.whatif.scenario import CapacityQuestion, Case, Scenario

REPAIR_ROUNDS = 3
REPAIR_FACTOR = 0.85
SHED_TOLERANCE = 1e-3
SIZING_TIME_LIMIT_S = 20.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizing:
    """The integer program's answer."""

    status: str  # "optimal", "feasible", "infeasible"
    counts: dict[str, int]
    cost_per_hour: float
    bound: float
    explanation: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class MinCostResult:
    status: str  # "optimal", "feasible", "infeasible", "unverified", "error"
    counts: dict[str, int] = field(default_factory=dict)  # accelerator kind → replicas
    cost_per_hour: float | None = None
    lower_bound: float | None = None  # the program's bound ($/h) at the final utilisation
    demand_rps: float = 0.0
    max_utilisation: float = 1.0
    rounds: int = 0
    verified: bool | None = None
    verify_attainment: float | None = None
    verify_shed_share: float | None = None
    plan_json: str | None = None
    explanation: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("plan_json")
        return out

    def describe(self) -> str:
        if self.cost_per_hour is None:
            return f"min-cost fleet: {self.status}: " + "; ".join(self.explanation[:4])
        fleet = ", ".join(f"{n}× {k}" for k, n in self.counts.items() if n > 0)
        verified = (
            f"verified: the plan sheds {self.verify_shed_share:.1%}, predicted attainment "
            f"{self.verify_attainment:.1%}"
            if self.verified is not None and self.verify_shed_share is not None
            else "not verified"
        )
        return (
            f"min-cost fleet for {self.demand_rps:.1f} req/s: {fleet} = "
            f"${self.cost_per_hour:.2f}/h (bound ${self.lower_bound or 0:.2f}/h, "
            f"utilisation ≤ {self.max_utilisation:.0%}, {self.rounds} round(s); {self.status}); "
            f"{verified}"
        )


def _group_name(kind: str) -> str:
    return kind.lower()


def candidate_fleet_doc(
    q: CapacityQuestion, model: str, counts: dict[str, int] | None = None
) -> dict[str, Any]:
    """A fleet document with ``counts`` replicas per candidate (one each when None)."""
    groups = []
    for name in q.candidates:
        kind = get_accelerator(name).kind
        n = 1 if counts is None else counts.get(kind, 0)
        if n > 0:
            groups.append(
                {
                    "kind": _group_name(kind),
                    "accelerator": kind,
                    "count": n,
                    "model": model,
                    "tp": q.tp,
                }
            )
    return {"name": "min-cost" if counts is not None else "candidates", "replicas": groups}


def size_fleet(
    inst: Instance,
    *,
    min_count: FloatArray,
    max_count: FloatArray,
    max_utilisation: float,
    time_limit_s: float = SIZING_TIME_LIMIT_S,
) -> Sizing:
    """Solve the sizing program on an instance whose replicas are one per candidate kind."""
    from ortools.math_opt.python import mathopt

    kinds = [inst.kind_accelerator[k] for k in range(len(inst.kind_accelerator))]
    n_units, n_kinds = inst.capacity.shape
    cap = inst.capacity
    unserved = [d for d in range(n_units) if inst.unit_rate[d] > 0 and not (cap[d] > 0).any()]
    if unserved:
        lines = [
            f"{inst.tenants[inst.unit_tenant[d]]}/{inst.classes[inst.unit_class[d]]} "
            f"({inst.unit_rate[d]:.2f} req/s, {inst.unit_input[d]:.0f} prompt tokens) cannot meet "
            f"its SLO on any candidate"
            for d in unserved[:5]
        ]
        return Sizing(
            status="infeasible",
            counts={},
            cost_per_hour=math.nan,
            bound=math.nan,
            explanation=lines,
        )
    model = mathopt.Model(name="min-cost-fleet")
    n = [
        model.add_integer_variable(lb=float(min_count[k]), ub=float(max_count[k]), name=f"n_{k}")
        for k in range(n_kinds)
    ]
    load: list[list[Any]] = [[] for _ in range(n_kinds)]
    for d in range(n_units):
        rate = float(inst.unit_rate[d])
        if rate <= 0:
            continue
        shares = []
        for k in np.flatnonzero(cap[d] > 0).tolist():
            x = model.add_variable(lb=0.0, ub=1.0, name=f"x_{d}_{k}")
            shares.append(x)
            load[k].append((rate / float(cap[d, k])) * x)
        model.add_linear_constraint(sum(shares) == 1.0)
    for k in range(n_kinds):
        if load[k]:
            model.add_linear_constraint(sum(load[k]) <= max_utilisation * n[k])
    cost = [float(inst.kind_cost[k]) for k in range(n_kinds)]
    model.minimize(sum(c * v for c, v in zip(cost, n, strict=True)))
    params = mathopt.SolveParameters(time_limit=timedelta(seconds=time_limit_s))
    result = mathopt.solve(model, mathopt.SolverType.HIGHS, params=params)
    reason = result.termination.reason
    if reason == mathopt.TerminationReason.INFEASIBLE:
        return Sizing(
            status="infeasible",
            counts={},
            cost_per_hour=math.nan,
            bound=math.nan,
            explanation=["the demand needs more replicas than max_count allows"],
        )
    if not result.has_primal_feasible_solution():
        return Sizing(
            status="infeasible",
            counts={},
            cost_per_hour=math.nan,
            bound=math.nan,
            explanation=[f"no fleet found in {time_limit_s:g} s ({reason.name})"],
        )
    values = result.variable_values()
    counts = {kinds[k]: round(values[n[k]]) for k in range(n_kinds)}
    return Sizing(
        status="optimal" if reason == mathopt.TerminationReason.OPTIMAL else "feasible",
        counts=counts,
        cost_per_hour=sum(cost[k] * counts[kinds[k]] for k in range(n_kinds)),
        bound=float(result.termination.objective_bounds.dual_bound),
    )


def _bounds(q: CapacityQuestion, kinds: tuple[str, ...]) -> tuple[FloatArray, FloatArray]:
    lo = {get_accelerator(k).kind: v for k, v in q.min_count.items()}
    hi = {get_accelerator(k).kind: v for k, v in q.max_count.items()}
    return (
        np.asarray([lo.get(k, 0) for k in kinds], dtype=np.float64),
        np.asarray([hi.get(k, q.default_max_count) for k in kinds], dtype=np.float64),
    )


def _instance(scenario: Scenario, inputs: CaseInputs, doc: dict[str, Any]) -> Instance:
    from placement.solver import build_instance

    return build_instance(
        fleet_from_dict(doc, source=f"{scenario.source} (capacity_question fleet)"),
        inputs.requests,
        inputs.tenants,
        inputs.classes,
        window_s=inputs.window_s,
        capacity=capacity_source(scenario),
        block_tokens=inputs.block_tokens,
    )


def answer_capacity_question(scenario: Scenario) -> MinCostResult:
    """Size, verify and (if the plan sheds) re-size the cheapest fleet for the scenario's
    capacity question."""
    q = scenario.capacity_question
    if q is None:
        raise InputError("the scenario asks no capacity question", field="capacity_question")
    from placement.solver import SolveOptions, solve_plan

    with scenario_accelerators(scenario.accelerators):
        inputs = case_inputs(
            scenario,
            Case(name="capacity_question", changes=q.changes, where="capacity_question.changes"),
            fleet_changes=False,
        )
        model = q.model or str(scenario.fleet["replicas"][0]["model"])
        inst = _instance(scenario, inputs, candidate_fleet_doc(q, model))
        lo, hi = _bounds(q, inst.kind_accelerator)
        demand = float(inst.unit_rate.sum())
        u = q.max_utilisation
        last: MinCostResult | None = None
        for round_ in range(1, REPAIR_ROUNDS + 1):
            sizing = size_fleet(inst, min_count=lo, max_count=hi, max_utilisation=u)
            if sizing.status == "infeasible":
                return last or MinCostResult(
                    status="infeasible",
                    demand_rps=demand,
                    max_utilisation=u,
                    rounds=round_,
                    explanation=sizing.explanation,
                )
            result = MinCostResult(
                status=sizing.status,
                counts=sizing.counts,
                cost_per_hour=sizing.cost_per_hour,
                lower_bound=sizing.bound,
                demand_rps=demand,
                max_utilisation=u,
                rounds=round_,
            )
            if not q.verify:
                return result
            chosen = _instance(scenario, inputs, candidate_fleet_doc(q, model, sizing.counts))
            try:
                plan = solve_plan(
                    chosen,
                    time_limit_s=scenario.time_limit_s,
                    created_at=0.0,
                    options=SolveOptions(attainment=scenario.plan_attainment),
                )
            except InfeasiblePlan as exc:
                last = _replace(
                    result, verified=False, status="unverified", explanation=exc.explanation
                )
                u *= REPAIR_FACTOR
                continue
            outs = plan.outcomes
            total = sum(o.demand_rps for o in outs) or 1.0
            shed = sum(o.demand_rps * o.shed_share for o in outs) / total
            attainment = sum(o.demand_rps * o.predicted_attainment for o in outs) / total
            ok = shed <= SHED_TOLERANCE
            last = _replace(
                result,
                verified=ok,
                status=result.status if ok else "unverified",
                verify_attainment=attainment,
                verify_shed_share=shed,
                plan_json=plan.to_json(),
                explanation=[] if ok else [f"the plan on this fleet sheds {shed:.1%}"],
            )
            if ok:
                return last
            u *= REPAIR_FACTOR
        assert last is not None
        return last


def _replace(r: MinCostResult, **changes: Any) -> MinCostResult:
    from dataclasses import replace

    return replace(r, **changes)


def safe_answer(scenario: Scenario) -> MinCostResult:
    """:func:`answer_capacity_question`, with any failure an ``error`` result."""
    try:
        return answer_capacity_question(scenario)
    except Exception as exc:
        return MinCostResult(status="error", explanation=[f"{type(exc).__name__}: {exc}"])
