"""Solving: instance → candidates → one program per model pool → solution → plan.

Per pool (pools share no replica and tenant credits are split per pool, so they are
independent; each gets the time left in proportion to its size, :func:`pool_budget`), with
the default backend (an LP solver through MathOpt):

1. **Relaxation.** The program with ``y`` relaxed; its optimum is the LP-relaxation bound
   every reported gap is measured against (over the candidate pairs). GLOP starts from the
   basis at the previous plan's shares, or the greedy plan's without one
   (:mod:`placement.solver.basis`): a re-solve after a small shift is then a few pivots.
   Infeasible: retry once with 4× the candidates (pruning can cut a feasible instance), then
   explain and raise :class:`InfeasiblePlan`. No solution in the time limit: the greedy plan,
   status ``greedy``. Model invalid: :class:`SolverFailed`.
2. **Rounding.** Pairs with a share ≥ :data:`MIN_ROUTE_SHARE` keep a warm prefix (``y = 1``)
   while their replica's KV budget has room, the pairs carrying the most traffic first
   (:func:`_round_warm`); the rest get ``y = 0``.
3. **Repair.** The program again with ``y`` fixed: every value is then feasible for the
   integer model, and its objective against the bound of step 1 is the gap.

``integer_warm=True`` (or the ``cp-sat`` backend) instead solves the mixed-integer program
with ``y`` binary directly, hinted with the previous plan; the bound is then the tighter of the
relaxation's and the solver's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from placement.errors import InfeasiblePlan, PlacementError
from placement.plan.schema import Plan, SolverStatus
from placement.solver.basis import basis_at
from placement.solver.candidates import TOP_K, Candidates, select_candidates
from placement.solver.chunk_split import with_class_split
from placement.solver.explain import explain_credits, explain_slos, explain_unserved_models
from placement.solver.greedy import greedy_shares
from placement.solver.instance import BoolArray, FloatArray, Instance, IntArray
from placement.solver.lp import LinearProgram, LpResult, solve
from placement.solver.model import DEFAULT_WEIGHTS, PoolModel, Weights, build_pool_model
from placement.solver.pooled_attainment import AttainmentModel
from placement.solver.previous import pair_shares, previous_shares
from placement.solver.solution import PoolSolution, Solution

MIN_ROUTE_SHARE = 1e-3
OPTIMAL_GAP = 1e-4
RELAXATION_TIME_SHARE = 0.7
WIDER_CANDIDATES = 4


class SolverFailed(PlacementError):
    """The solver rejected the model (invalid) or failed numerically: a bug, not an input."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SolveOptions:
    backend: str = "mathopt-glop"
    integer_warm: bool = False
    top_k: int = TOP_K
    weights: Weights = DEFAULT_WEIGHTS
    # the model of the plan's reported predicted attainment (not of its objective):
    # per replica (:mod:`placement.solver.attainment`) or per pool of replicas the route path
    # shares a request between (:mod:`placement.solver.pooled_attainment`)
    attainment: AttainmentModel = "replica"


#: Relaxation outcomes with no solution to use: the pool takes the greedy plan (status
#: ``greedy``), whose shares respect every capacity, rather than stopping the loop.
UNUSABLE = ("no_solution", "imprecise", "numerical_error")
#: A relaxation the solver could not certify or failed numerically is tried once more on
#: another backend before the greedy plan is taken.
OTHER_BACKEND = {"mathopt-glop": "mathopt-highs"}
DEFAULT_OTHER_BACKEND = "mathopt-glop"
RETRIED = "retried"


def _relax(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
    """The relaxation on ``backend``, and once on another one when the first answer was
    imprecise or a numerical failure (what each said is kept in ``detail``)."""
    t0 = time.perf_counter()
    first = solve(lp, backend=backend, time_limit_s=time_limit_s)
    if first.status not in ("imprecise", "numerical_error"):
        return first
    other = OTHER_BACKEND.get(backend, DEFAULT_OTHER_BACKEND)
    left = max(time_limit_s - (time.perf_counter() - t0), 0.05)
    second = solve(replace(lp, basis=None), backend=other, time_limit_s=left)
    said = f"{backend}: {first.status} ({first.detail}); {other}: {second.status}"
    return replace(second, detail=said, extra={**second.extra, RETRIED: 1.0})


def _said(relaxed: LpResult) -> str:
    """What the plan records of the relaxation: nothing for a first-time optimum."""
    if relaxed.status == "optimal" and RETRIED not in relaxed.extra:
        return ""
    if RETRIED in relaxed.extra:
        return relaxed.detail
    return f"relaxation {relaxed.status}" + (f" ({relaxed.detail})" if relaxed.detail else "")


def _pool_cands(cands: Candidates, inst: Instance, model: int) -> Candidates:
    mask = inst.unit_model[cands.unit] == model
    return Candidates(cands.unit[mask], cands.replica[mask])


def _n_main(pm: PoolModel) -> int:
    """Columns x, c and stay: the part of a solution every program of the pool shares."""
    return pm.n_pairs + len(pm.cold_pair) + len(pm.stay_pair)


def _trivial_bound(inst: Instance, pm: PoolModel) -> float:
    """Every unit served at its best pair and nothing moved: an upper bound without an LP."""
    n = pm.n_pairs
    best = np.zeros(inst.n_units)
    np.maximum.at(best, pm.pair_unit, pm.lp.obj[:n])
    return float(best.sum() + pm.lp.obj[n + len(pm.cold_pair) : _n_main(pm)].sum())


def _round_warm(inst: Instance, pm: PoolModel, x_warm: FloatArray) -> BoolArray:
    """``y`` from a relaxed warm share: kept where the share is worth a route, within KV
    budgets. The relaxation charges a group's prefix to a replica in proportion to the share
    it sends there, so it may split a group over replicas that cannot each hold it. Budgets are
    filled greedily over the whole pool, the groups carrying the most warm traffic first, each
    on its pairs with the most traffic while they fit (first-fit knapsack); a group that fits
    on none of them is moved warm to its candidate replica with the most room left (the
    repair then routes its traffic there)."""
    pu, pr = pm.pair_unit, pm.pair_replica
    is_group = inst.unit_key[pu] >= 0
    traffic = np.where(is_group & (x_warm >= MIN_ROUTE_SHARE), x_warm, 0.0) * inst.unit_rate[pu]
    warm = np.zeros(len(pu), dtype=bool)
    left = inst.replica_kv_budget.astype(np.float64).copy()
    pairs_of: dict[int, list[int]] = {}
    for p in np.flatnonzero(is_group).tolist():
        pairs_of.setdefault(int(pu[p]), []).append(p)
    unit_traffic = {u: float(traffic[ps].sum()) for u, ps in pairs_of.items()}
    for u in sorted(pairs_of, key=lambda u: (-unit_traffic[u], u)):
        if unit_traffic[u] <= 0:
            break
        need = float(inst.unit_prefix[u])
        placed = False
        for p in sorted(pairs_of[u], key=lambda p: -traffic[p]):
            if traffic[p] > 0 and need <= left[pr[p]] + 1e-6:
                warm[p] = True
                left[pr[p]] -= need
                placed = True
        if not placed:
            roomiest = max(pairs_of[u], key=lambda p: left[pr[p]])
            if need <= left[pr[roomiest]] + 1e-6:
                warm[roomiest] = True
                left[pr[roomiest]] -= need
    return warm


def _repair(
    inst: Instance,
    pm: PoolModel,
    relaxed: LpResult,
    prev: FloatArray,
    budget_s: float,
    opts: SolveOptions,
    cands: Candidates,
    model: int,
) -> tuple[FloatArray, BoolArray, SolverStatus]:
    """Round ``y`` and re-solve with it fixed; the relaxed solution if that fails."""
    x_rel = relaxed.x[: pm.n_pairs]
    is_group = inst.unit_key[pm.pair_unit] >= 0
    warm = _round_warm(inst, pm, x_rel)
    small = (x_rel > 0) & (x_rel < MIN_ROUTE_SHARE)
    changed = (is_group & (x_rel > 0) & ~warm) | small
    if not changed.any():
        # the relaxed optimum is already integral in y (no split below the route threshold,
        # no KV budget overrun): it is optimal for the integer model too
        return (
            relaxed.x[: _n_main(pm)],
            warm,
            "optimal" if relaxed.status == "optimal" else "feasible",
        )
    fixed = build_pool_model(
        inst, model, cands, prev_share=prev, weights=opts.weights, warm_support=warm
    )
    fixed.lp.ub[: pm.n_pairs][small & ~is_group] = 0.0
    # only the units rounding touched are re-optimised; the others keep their relaxed values
    touched = np.zeros(inst.n_units, dtype=bool)
    touched[pm.pair_unit[changed]] = True
    n_main = _n_main(pm)
    pair_of_col = np.concatenate([np.arange(pm.n_pairs), pm.cold_pair, pm.stay_pair])
    frozen = np.flatnonzero(~touched[pm.pair_unit[pair_of_col]])
    value = relaxed.x[:n_main][frozen]
    fixed.lp.lb[frozen] = value
    fixed.lp.ub[frozen] = value
    res = solve(fixed.lp, backend=opts.backend, time_limit_s=budget_s)
    if res.status in ("optimal", "feasible"):
        return res.x[: _n_main(pm)], warm, res.status
    # the repair lost feasibility (floors) or time: keep the relaxed shares, warm only where
    # the rounding kept the prefix within the replica's KV budget (the rest is served cold)
    sol = relaxed.x[: _n_main(pm)]
    return sol, warm & (sol[: pm.n_pairs] > 1e-9), "feasible"


def _solve_pool(
    inst: Instance,
    model: int,
    cands: Candidates,
    prev_all: tuple[IntArray, IntArray, FloatArray],
    time_limit_s: float,
    opts: SolveOptions,
) -> PoolSolution | list[str]:
    """A pool's solution, or the lines explaining why it is infeasible."""
    t0 = time.perf_counter()
    integer = opts.integer_warm or opts.backend == "cp-sat"
    relax_backend = "mathopt-glop" if opts.backend == "cp-sat" else opts.backend
    for attempt in range(2):
        prev = pair_shares(cands.unit, cands.replica, prev_all, inst.n_replicas)
        pm = build_pool_model(inst, model, cands, prev_share=prev, weights=opts.weights)
        if relax_backend == "mathopt-glop":
            # start the simplex at the previous plan, or for a cold solve at the greedy one
            pm.lp.basis = basis_at(pm, prev if prev.any() else greedy_shares(inst, pm, prev))
        relaxed = _relax(
            pm.lp,
            backend=relax_backend,
            time_limit_s=time_limit_s * (0.3 if integer else RELAXATION_TIME_SHARE),
        )
        if relaxed.status != "infeasible" or attempt == 1:
            break
        cands = _pool_cands(
            select_candidates(
                inst,
                top_k=opts.top_k * WIDER_CANDIDATES,
                keep_unit=prev_all[0],
                keep_replica=prev_all[1],
            ),
            inst,
            model,
        )
    if relaxed.status == "infeasible":
        lines = explain_credits(inst, model, top_k=opts.top_k * WIDER_CANDIDATES)
        return lines or [
            f"the {inst.models[model]} pool is infeasible for a reason the capacity-deficit "
            "program does not show"
        ]
    if relaxed.status == "model_invalid":
        raise SolverFailed(f"the {inst.models[model]} pool's model is invalid: {relaxed.detail}")
    left = max(time_limit_s - (time.perf_counter() - t0), 0.05)
    status: SolverStatus
    n_main = _n_main(pm)
    if relaxed.status in UNUSABLE:
        x = greedy_shares(inst, pm, prev)
        sol = np.zeros(n_main)
        sol[: pm.n_pairs] = x
        sol[pm.n_pairs + len(pm.cold_pair) :] = np.minimum(x, prev)[pm.stay_pair]
        warm = _round_warm(inst, pm, x)  # within the KV budgets
        status = "greedy"
        bound = relaxed.bound if math.isfinite(relaxed.bound) else _trivial_bound(inst, pm)
    elif integer:
        mip = build_pool_model(
            inst, model, cands, prev_share=prev, weights=opts.weights, integer_warm=True
        )
        res = solve(mip.lp, backend=opts.backend, time_limit_s=left)
        bound = min(relaxed.bound, res.bound)
        if res.status in ("optimal", "feasible"):
            sol = res.x[:n_main]
            warm = np.zeros(mip.n_pairs, dtype=bool)
            warm[mip.y_pair] = res.x[n_main : n_main + len(mip.y_pair)] > 0.5
            status = res.status
        else:
            sol, warm, status = _repair(inst, pm, relaxed, prev, left, opts, cands, model)
    else:
        bound = relaxed.bound
        sol, warm, status = _repair(inst, pm, relaxed, prev, left, opts, cands, model)
    objective = float(pm.lp.obj[:n_main] @ sol)
    if not math.isfinite(bound):
        bound = _trivial_bound(inst, pm)  # a time-limited relaxation proved no bound
    if status == "optimal" and bound - objective > OPTIMAL_GAP * max(abs(bound), 1e-9):
        status = "feasible"  # the repair's optimum, not the integer model's (proven) one
    full = np.maximum(np.concatenate([sol, np.zeros(pm.lp.n_vars - n_main)]), 0.0)
    x = pm.served(full)
    return PoolSolution(
        model=model,
        pair_unit=pm.pair_unit,
        pair_replica=pm.pair_replica,
        x=x,
        util=pm.utilisation(full),
        warm=warm & (full[: pm.n_pairs] > 0),
        prev=prev,
        floor=pm.floor,
        cap=pm.cap,
        status=status,
        objective=objective,
        bound=max(bound, objective),
        detail=_said(relaxed),
    )


def pool_budget(time_left_s: float, sizes: FloatArray) -> float:
    """The time limit of the next pool: the time left, in proportion to its size
    (``sizes[0]``) among the pools still to solve, so that a pool finishing early leaves
    its time to the others rather than to no one."""
    return max(time_left_s * float(sizes[0] / sizes.sum()), 0.05)


_STATUS_RANK: dict[SolverStatus, int] = {"optimal": 0, "feasible": 1, "time_limit": 2, "greedy": 3}


def solve_instance(
    inst: Instance,
    *,
    previous: Plan | None = None,
    time_limit_s: float = 10.0,
    options: SolveOptions = SolveOptions(),
) -> Solution:
    """Solve every model pool; raise :class:`InfeasiblePlan` with the reasons if any is."""
    t0 = time.perf_counter()
    prev_all = previous_shares(inst, previous)
    cands = select_candidates(
        inst, top_k=options.top_k, keep_unit=prev_all[0], keep_replica=prev_all[1]
    )
    explanation = explain_unserved_models(inst)
    pools_with_demand = [
        m
        for m in range(len(inst.models))
        if (inst.unit_model == m).any() and (inst.replica_model[inst.replica_healthy] == m).any()
    ]
    sizes = np.asarray(
        [max(1, int((inst.unit_model[cands.unit] == m).sum())) for m in pools_with_demand],
        dtype=np.float64,
    )
    pools: list[PoolSolution] = []
    for i, m in enumerate(pools_with_demand):
        budget = pool_budget(time_limit_s - (time.perf_counter() - t0), sizes[i:])
        slos = explain_slos(inst, m)
        if slos:
            explanation.extend(slos)
            continue
        out = _solve_pool(inst, m, _pool_cands(cands, inst, m), prev_all, budget, options)
        if isinstance(out, list):
            explanation.extend(out)
        else:
            pools.append(out)
    if explanation:
        raise InfeasiblePlan(
            "the guaranteed credits and SLOs cannot all hold", explanation=explanation
        )
    objective = sum(p.objective for p in pools)
    bound = sum(p.bound for p in pools)
    gap = max(bound - objective, 0.0) / max(abs(bound), 1e-9)
    status: SolverStatus = max(
        (p.status for p in pools), key=lambda s: _STATUS_RANK.get(s, 0), default="optimal"
    )
    backend = options.backend + (
        "+mip" if options.integer_warm and options.backend != "cp-sat" else ""
    )
    return Solution(
        pools=tuple(pools),
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        solve_s=time.perf_counter() - t0,
        backend=backend,
        detail="; ".join(f"{inst.models[p.model]}: {p.detail}" for p in pools if p.detail),
    )


def solve_plan(
    instance: Instance,
    *,
    previous: Plan | None = None,
    time_limit_s: float = 10.0,
    version: int | None = None,
    options: SolveOptions = SolveOptions(),
    created_at: float | None = None,
) -> Plan:
    """The plan for ``instance``: solved, extracted, with objective, bound, gap and churn.

    ``version`` defaults to the previous plan's + 1 (1 without one). Raises
    :class:`InfeasiblePlan` (with the explanation) or :class:`SolverFailed`."""
    from placement.solver.extract import extract_plan

    if instance.replica_classes.size == 0:
        instance = with_class_split(instance)
    solution = solve_instance(
        instance, previous=previous, time_limit_s=time_limit_s, options=options
    )
    v = version if version is not None else (previous.version + 1 if previous else 1)
    return extract_plan(
        instance,
        solution,
        version=v,
        previous=previous,
        time_limit_s=time_limit_s,
        created_at=time.time() if created_at is None else created_at,
        attainment=options.attainment,
    )


__all__ = [
    "AttainmentModel",
    "Solution",
    "SolveOptions",
    "SolverFailed",
    "solve_instance",
    "solve_plan",
]
