"""Running a scenario: each case solved on its own, in parallel on Dask.

One case = the case's fleet and demand → :func:`~placement.solver.build_instance` →
:func:`~placement.solver.solve_plan` (warm-started from the base case's plan, so churn is the
traffic the change would move) → a :class:`CaseResult` row. An infeasible case is a row that
says so with the solver's explanation; it never fails the sweep.

Cases are pure functions of the scenario: :func:`run_case` registers the scenario's
accelerators, rebuilds the inputs and solves, wherever it runs. :func:`run_scenario` runs the
base case first (its plan is every other case's previous plan), then the rest, on a
``distributed.Client`` at ``scheduler``, a fresh ``LocalCluster``, or (``sync``) in-process.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from placement.domain.fleet import Fleet
from placement.errors import InfeasiblePlan, PlacementError
from placement.plan.schema import Plan
from placement.whatif.accelerators import scenario_accelerators
from placement.whatif.inputs import CaseInputs, capacity_source, case_inputs
from placement.whatif.min_cost import MinCostResult, safe_answer
from placement.whatif.scenario import BASE_CASE, Case, Scenario
from placement.whatif.simulate import PlanPolicy, simulate_plan

LOCAL_WORKERS = 2
MIN_COST_TASK = "capacity question"
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One row of the what-if table, plus the plan (JSON) when the case was solved."""

    case: str
    where: str
    swept_value: float | None
    status: str  # the solver status, "infeasible" or "error"
    fleet: str  # "h100×3 a100×3 l40s×4"
    replicas: int
    cost_per_hour: float
    demand_rps: float
    attainment: float | None = None  # demand-weighted predicted attainment
    shed_share: float | None = None
    churn: float | None = None
    solve_s: float = 0.0
    attainment_by_class: dict[str, float] = field(default_factory=dict)
    attainment_by_tenant: dict[str, float] = field(default_factory=dict)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)
    capacity_source: str = ""
    # per replica kind of the case's fleet: where its engine timings come from
    timing_sources: list[dict[str, Any]] = field(default_factory=list)
    plan_json: str | None = None
    simulated: dict[str, Any] | None = None  # attainment measured in the simulator
    wall_s: float = 0.0

    @property
    def solved(self) -> bool:
        return self.plan_json is not None


def fleet_label(doc: dict[str, Any]) -> str:
    return " ".join(f"{g['kind']}×{g['count']}" for g in doc.get("replicas", []))


def _weighted(pairs: Sequence[tuple[str, float, float]]) -> dict[str, float]:
    """Demand-weighted mean of values per key, from (key, demand, value) triples."""
    num: dict[str, float] = {}
    den: dict[str, float] = {}
    for key, demand, value in pairs:
        num[key] = num.get(key, 0.0) + demand * value
        den[key] = den.get(key, 0.0) + demand
    return {k: num[k] / den[k] for k in sorted(num) if den[k] > 0}


def summarise_plan(plan: Plan) -> dict[str, Any]:
    """The row's figures from a plan's outcomes."""
    outs = plan.outcomes
    demand = sum(o.demand_rps for o in outs)
    served = sum(o.served_rps for o in outs)
    return {
        # of the admitted traffic; the shed share is its own column
        "attainment": (
            sum(o.served_rps * o.predicted_attainment for o in outs) / served if served else 1.0
        ),
        "shed_share": sum(o.demand_rps * o.shed_share for o in outs) / demand if demand else 0.0,
        "attainment_by_class": _weighted(
            [(o.request_class, o.served_rps, o.predicted_attainment) for o in outs]
        ),
        "attainment_by_tenant": _weighted(
            [(o.tenant, o.served_rps, o.predicted_attainment) for o in outs]
        ),
        "outcomes": [o.model_dump(mode="json") for o in outs],
    }


def fleet_timing_sources(fleet: Fleet) -> list[dict[str, Any]]:
    """Per replica kind of ``fleet``: its timing source (:mod:`sim.costmodel.sources`)."""
    from sim.costmodel.sources import replica_sources

    kinds = ((r.accelerator, r.model, r.tp) for r in fleet.replicas)
    return [
        {"model": model, "tp": tp, **source.as_dict()}
        for model, tp, source in replica_sources(kinds)
    ]


def _solve(
    scenario: Scenario, case: Case, inputs: CaseInputs, previous: Plan | None
) -> tuple[Plan | None, list[str], str, str]:
    """(plan, explanation, status, capacity source) of one case."""
    from placement.solver import SolveOptions, build_instance, solve_plan

    source = capacity_source(scenario)
    inst = build_instance(
        inputs.fleet,
        inputs.requests,
        inputs.tenants,
        inputs.classes,
        window_s=inputs.window_s,
        capacity=source,
        block_tokens=inputs.block_tokens,
    )
    try:
        plan = solve_plan(
            inst,
            previous=previous,
            time_limit_s=scenario.time_limit_s,
            version=(previous.version + 1) if previous is not None else 1,
            created_at=0.0,  # a what-if plan is a hypothesis, not a publication
            options=SolveOptions(attainment=scenario.plan_attainment),
        )
    except InfeasiblePlan as exc:
        return None, exc.explanation or [str(exc)], "infeasible", inst.capacity_source
    return plan, [], plan.solver.status, inst.capacity_source


def run_case(
    scenario: Scenario,
    case: Case,
    previous_json: str | None = None,
    simulate: PlanPolicy | None = None,
) -> CaseResult:
    """Solve one case (anywhere: a Dask worker or this process) and summarise it."""
    t0 = time.perf_counter()
    previous = Plan.from_json(previous_json) if previous_json else None
    with scenario_accelerators(scenario.accelerators):
        inputs = case_inputs(scenario, case)
        label = fleet_label(inputs.fleet_doc)
        demand = len(inputs.requests) / inputs.window_s
        common: dict[str, Any] = {
            "case": case.name,
            "where": case.where,
            "swept_value": case.swept_value,
            "fleet": label,
            "replicas": len(inputs.fleet.replicas),
            "cost_per_hour": inputs.fleet.cost_per_hour,
            "demand_rps": demand,
            "timing_sources": fleet_timing_sources(inputs.fleet),
        }
        try:
            plan, explanation, status, source = _solve(scenario, case, inputs, previous)
        except PlacementError as exc:
            return CaseResult(
                **common,
                status="error",
                explanation=[str(exc)],
                wall_s=time.perf_counter() - t0,
            )
        if plan is None:
            return CaseResult(
                **common,
                status=status,
                explanation=explanation,
                capacity_source=source,
                wall_s=time.perf_counter() - t0,
            )
        simulated = None
        if simulate is not None:
            simulated = simulate_plan(inputs, plan, seed=scenario.seed, policy_for=simulate)
        return CaseResult(
            **common,
            **summarise_plan(plan),
            status=status,
            churn=plan.solver.churn if previous is not None else None,
            solve_s=plan.solver.solve_s,
            capacity_source=source,
            plan_json=plan.to_json(),
            simulated=simulated,
            wall_s=time.perf_counter() - t0,
        )


def _safe_run_case(
    scenario: Scenario, case: Case, previous: CaseResult | None, simulate: PlanPolicy | None
) -> CaseResult:
    """:func:`run_case` that turns an unexpected failure into an ``error`` row."""
    try:
        return run_case(
            scenario, case, previous.plan_json if previous is not None else None, simulate
        )
    except Exception as exc:
        return CaseResult(
            case=case.name,
            where=case.where,
            swept_value=case.swept_value,
            status="error",
            fleet="",
            replicas=0,
            cost_per_hour=0.0,
            demand_rps=0.0,
            explanation=[f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)],
        )


@contextmanager
def dask_client(scheduler: str | None) -> Iterator[Any]:
    """A client on ``scheduler`` or on a fresh LocalCluster (closed on exit)."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        client = Client(scheduler)  # type: ignore[no-untyped-call]
        try:
            yield client
        finally:
            client.close()  # type: ignore[no-untyped-call]
        return
    with (
        LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=LOCAL_WORKERS,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):
        yield client


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioResult:
    cases: list[CaseResult]
    min_cost: MinCostResult | None = None


def task_count(scenario: Scenario) -> int:
    """Tasks :func:`run_scenario` reports progress for (cases and the capacity question)."""
    return len(scenario.cases) + (scenario.capacity_question is not None)


def run_scenario(
    scenario: Scenario,
    *,
    scheduler: str | None = None,
    sync: bool = False,
    simulate: PlanPolicy | None = None,
    client: Any = None,
    progress: Progress | None = None,
) -> ScenarioResult:
    """Every case of ``scenario`` (base first, in the scenario's order) and the answer to its
    capacity question.

    ``client`` (a ``distributed.Client``) is used as is; else ``scheduler`` or a LocalCluster;
    ``sync`` runs in this process without Dask. ``progress`` is called with each task's name
    as it completes."""
    cases = scenario.cases
    base = next(c for c in cases if c.name == BASE_CASE)
    rest = [c for c in cases if c.name != BASE_CASE]
    tick = progress or (lambda _name: None)
    if sync:
        base_result = _safe_run_case(scenario, base, None, simulate)
        tick(base.name)
        results = {base.name: base_result}
        for c in rest:
            results[c.name] = _safe_run_case(scenario, c, base_result, simulate)
            tick(c.name)
        min_cost = None
        if scenario.capacity_question is not None:
            min_cost = safe_answer(scenario)
            tick(MIN_COST_TASK)
        return ScenarioResult(cases=[results[c.name] for c in cases], min_cost=min_cost)
    if client is not None:
        return _run_on(client, scenario, base, rest, simulate, tick)
    with dask_client(scheduler) as own:
        return _run_on(own, scenario, base, rest, simulate, tick)


def _run_on(
    client: Any,
    scenario: Scenario,
    base: Case,
    rest: Sequence[Case],
    simulate: PlanPolicy | None,
    tick: Progress,
) -> ScenarioResult:
    from distributed import as_completed

    base_f = client.submit(_safe_run_case, scenario, base, None, simulate, pure=False)
    futures = {base_f: base.name}
    if scenario.capacity_question is not None:
        futures[client.submit(safe_answer, scenario, pure=False)] = MIN_COST_TASK
    for c in rest:
        # the base future as an argument: Dask runs the case once the base plan exists
        futures[client.submit(_safe_run_case, scenario, c, base_f, simulate, pure=False)] = c.name
    results: dict[str, Any] = {}
    for fut in as_completed(list(futures)):  # type: ignore[no-untyped-call]
        results[futures[fut]] = fut.result()
        tick(futures[fut])
    min_cost = results.pop(MIN_COST_TASK, None)
    return ScenarioResult(cases=[results[c.name] for c in (base, *rest)], min_cost=min_cost)
