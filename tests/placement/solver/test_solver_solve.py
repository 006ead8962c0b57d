from __future__ import annotations

import numpy as np
import pytest

from bench.solver import shifted, synthetic_instance
from placement.plan.diff import diff_plans
from placement.plan.schema import Plan
from placement.solver import solve_plan
from placement.solver.instance import Instance
from placement.solver.solve import pool_budget


@pytest.fixture(scope="module")
def first() -> tuple[Instance, Plan]:
    inst = synthetic_instance(40, seed=5)
    return inst, solve_plan(inst, time_limit_s=10.0)


def test_resolve_of_unchanged_demand_moves_almost_nothing(first: tuple[Instance, Plan]) -> None:
    inst, plan = first
    again = solve_plan(inst, previous=plan, time_limit_s=10.0)
    assert again.solver.status == "optimal"
    # not exactly 0: a default route is shared by the tenant's classes, which the solver
    # places apart (more so where the fast replicas are kept for the tight class,
    # placement.solver.chunk_split: 0.64% moved)
    assert again.solver.churn < 0.005
    assert diff_plans(plan, again).moved_share < 0.01


def test_resolve_after_a_small_shift_moves_little_at_a_small_gap(
    first: tuple[Instance, Plan],
) -> None:
    inst, plan = first
    again = solve_plan(shifted(inst, seed=2, share=0.1), previous=plan, time_limit_s=10.0)
    assert again.solver.status == "optimal" and again.solver.gap <= 1e-4
    assert again.solver.churn < 0.03
    assert diff_plans(plan, again).moved_share < 0.03


def test_resolve_keeps_the_cold_solves_goodput(first: tuple[Instance, Plan]) -> None:
    inst, plan = first
    moved = shifted(inst, seed=2, share=0.1)
    warm = solve_plan(moved, previous=plan, time_limit_s=10.0)
    cold = solve_plan(moved, time_limit_s=10.0)

    def served(p: Plan) -> float:
        return sum(t.admitted_rps for t in p.tenants)

    # staying put may cost a little goodput, never much (churn weight 0.1 per share moved)
    assert served(warm) >= 0.99 * served(cold)


def test_pool_budget_gives_the_time_left_by_size() -> None:
    assert pool_budget(9.0, np.asarray([1.0, 2.0])) == pytest.approx(3.0)
    # the last pool gets everything left, including what earlier pools did not use
    assert pool_budget(4.0, np.asarray([5.0])) == pytest.approx(4.0)
    assert pool_budget(-1.0, np.asarray([1.0, 1.0])) == pytest.approx(0.05)
