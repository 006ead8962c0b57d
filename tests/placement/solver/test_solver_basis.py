from __future__ import annotations

import numpy as np
import pytest

from bench.solver import shifted, synthetic_instance
from placement.solver import solve_plan
from placement.solver.basis import basis_at
from placement.solver.candidates import Candidates, select_candidates
from placement.solver.greedy import greedy_shares
from placement.solver.instance import Instance
from placement.solver.lp import BASIC, Basis, LinearProgram, solve
from placement.solver.model import PoolModel, build_pool_model
from placement.solver.previous import pair_shares, previous_shares


@pytest.fixture(scope="module")
def warm_pool() -> tuple[Instance, PoolModel, np.ndarray]:
    """Pool 0 of a shifted 40-replica instance with the first plan as the previous one."""
    inst = synthetic_instance(40, seed=5)
    first = solve_plan(inst, time_limit_s=10.0)
    moved = shifted(inst, seed=2)
    prev_all = previous_shares(moved, first)
    cands = _pool_cands(
        select_candidates(moved, keep_unit=prev_all[0], keep_replica=prev_all[1]), moved, 0
    )
    prev = pair_shares(cands.unit, cands.replica, prev_all, moved.n_replicas)
    return moved, build_pool_model(moved, 0, cands, prev_share=prev), prev


def _pool_cands(cands: Candidates, inst: Instance, model: int) -> Candidates:
    mask = inst.unit_model[cands.unit] == model
    return Candidates(cands.unit[mask], cands.replica[mask])


def _n_basic(basis: Basis) -> int:
    return int((basis.column == BASIC).sum() + (basis.row == BASIC).sum())


def test_previous_plan_basis_has_one_basic_entry_per_row(
    warm_pool: tuple[Instance, PoolModel, np.ndarray],
) -> None:
    _, pm, prev = warm_pool
    assert len(pm.stay_pair) > 0
    basis = basis_at(pm, prev)
    assert _n_basic(basis) == pm.lp.n_rows
    # every previous pair's x is in the basis, and the unit rows stay tight
    assert np.all(basis.column[: pm.n_pairs][prev > 0] == BASIC)
    assert np.all(basis.row[: len(pm.units)] != BASIC)


def test_greedy_basis_of_a_cold_pool_has_one_basic_entry_per_row() -> None:
    inst = synthetic_instance(40, seed=5)
    cands = _pool_cands(select_candidates(inst), inst, 1)
    pm = build_pool_model(inst, 1, cands)
    basis = basis_at(pm, greedy_shares(inst, pm, np.zeros(pm.n_pairs)))
    assert _n_basic(basis) == pm.lp.n_rows


def test_a_started_simplex_reaches_the_same_optimum(
    warm_pool: tuple[Instance, PoolModel, np.ndarray],
) -> None:
    _, pm, prev = warm_pool
    plain = solve(pm.lp, backend="mathopt-glop", time_limit_s=10.0)
    pm.lp.basis = basis_at(pm, prev)
    try:
        started = solve(pm.lp, backend="mathopt-glop", time_limit_s=10.0)
    finally:
        pm.lp.basis = None
    assert plain.status == started.status == "optimal"
    assert started.objective == pytest.approx(plain.objective, rel=1e-7)


def test_a_basis_the_solver_rejects_is_dropped() -> None:
    # max x0 + 2 x1, x0 + x1 ≤ 1.5: two basic columns for one row is no basis
    lp = LinearProgram(
        lb=np.zeros(2),
        ub=np.ones(2),
        obj=np.asarray([1.0, 2.0]),
        integer=np.zeros(2, dtype=bool),
        row_lb=np.asarray([-np.inf]),
        row_ub=np.asarray([1.5]),
        rows=np.asarray([0, 0]),
        cols=np.asarray([0, 1]),
        vals=np.asarray([1.0, 1.0]),
        basis=Basis(column=np.asarray([BASIC, BASIC]), row=np.asarray([BASIC])),
    )
    res = solve(lp, backend="mathopt-glop", time_limit_s=5.0)
    assert res.status == "optimal" and res.objective == pytest.approx(2.5)
