"""Every termination status of every backend has a branch, and none of them stops a loop:
an answer without a usable solution becomes the greedy plan (status ``greedy``) with what the
solver said kept in the plan, an invalid model a SolverFailed, an infeasible one an
explanation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ortools.math_opt import result_pb2
from ortools.sat import cp_model_pb2

import placement.solver.solve as solve_module
from placement.domain.fleet import fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Request, Tenant
from placement.plan.validate import problems
from placement.solver import FixedCapacity, SolverFailed, build_instance, solve_plan
from placement.solver.lp import (
    CPSAT_STATUS,
    MATHOPT_TERMINATION,
    LinearProgram,
    LpResult,
    solve,
)

FLEET = fleet_from_dict(
    {
        "name": "t",
        "replicas": [
            {"kind": "h100", "accelerator": "H100-SXM", "count": 3, "model": "llama-3-8b"}
        ],
    }
)
CAP = FixedCapacity({"H100-SXM": 10.0})


def _instance():  # type: ignore[no-untyped-def]
    reqs = [
        Request(
            i,
            i / 2.0,
            1200,
            100,
            tenant=f"t{i % 3}",
            request_class="interactive",
            model="llama-3-8b",
            block_hashes=chain_block_ids([5_000 + i]),
        )
        for i in range(40)
    ]
    tenants = {f"t{k}": Tenant(name=f"t{k}", credit_share=0.2) for k in range(3)}
    return build_instance(FLEET, reqs, tenants, window_s=20.0, capacity=CAP)


def test_every_mathopt_termination_reason_has_a_status() -> None:
    for name, number in result_pb2.TerminationReasonProto.items():
        assert number in MATHOPT_TERMINATION, name
    assert MATHOPT_TERMINATION[result_pb2.TERMINATION_REASON_IMPRECISE] == "imprecise"
    assert MATHOPT_TERMINATION[result_pb2.TERMINATION_REASON_NO_SOLUTION_FOUND] == "no_solution"
    assert MATHOPT_TERMINATION[result_pb2.TERMINATION_REASON_NUMERICAL_ERROR] == "numerical_error"


def test_every_cpsat_status_has_a_status() -> None:
    for name, number in cp_model_pb2.CpSolverStatus.items():
        assert number in CPSAT_STATUS, name
    assert CPSAT_STATUS[cp_model_pb2.UNKNOWN] == "no_solution"


def _tiny_lp(obj: float) -> LinearProgram:
    return LinearProgram(
        obj=np.array([obj]),
        lb=np.zeros(1),
        ub=np.ones(1),
        integer=np.zeros(1, dtype=bool),
        rows=np.zeros(1, dtype=np.int64),
        cols=np.zeros(1, dtype=np.int64),
        vals=np.ones(1),
        row_lb=np.array([-math.inf]),
        row_ub=np.array([1.0]),
    )


@pytest.mark.parametrize("backend", ["mathopt-glop", "mathopt-highs", "cp-sat"])
def test_a_real_solve_reports_optimal(backend: str) -> None:
    res = solve(_tiny_lp(2.0), backend=backend, time_limit_s=5.0)
    assert res.status == "optimal" and res.objective == pytest.approx(2.0)


@pytest.mark.parametrize("backend", ["mathopt-glop", "mathopt-highs"])
def test_a_nan_coefficient_is_an_invalid_model_not_an_exception(backend: str) -> None:
    res = solve(_tiny_lp(math.nan), backend=backend, time_limit_s=5.0)
    assert res.status == "model_invalid" and res.detail


def test_an_invalid_model_raises_solver_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    def invalid(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
        return LpResult("model_invalid", np.zeros(0), math.nan, math.inf, 0.0, "bad")

    monkeypatch.setattr(solve_module, "solve", invalid)
    with pytest.raises(SolverFailed, match="invalid"):
        solve_plan(_instance(), time_limit_s=2.0)


@pytest.mark.parametrize("status", ["imprecise", "numerical_error"])
def test_an_uncertified_relaxation_is_retried_on_another_backend(
    monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    real = solve_module.solve
    seen: list[str] = []

    def first_fails(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
        seen.append(backend)
        if len(seen) == 1:
            return LpResult(status, np.zeros(0), math.nan, math.inf, 0.0, "forced")  # type: ignore[arg-type]
        return real(lp, backend=backend, time_limit_s=time_limit_s)

    monkeypatch.setattr(solve_module, "solve", first_fails)
    plan = solve_plan(_instance(), time_limit_s=5.0)
    assert seen[:2] == ["mathopt-glop", "mathopt-highs"]
    assert plan.solver.status in ("optimal", "feasible")
    assert f"mathopt-glop: {status} (forced)" in plan.solver.detail
    assert problems(plan, fleet=FLEET) == []


@pytest.mark.parametrize("status", ["no_solution", "imprecise", "numerical_error"])
def test_no_usable_relaxation_gives_the_greedy_plan_and_says_why(
    monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    def never(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
        return LpResult(status, np.zeros(0), math.nan, math.inf, 0.0, "forced")  # type: ignore[arg-type]

    monkeypatch.setattr(solve_module, "solve", never)
    plan = solve_plan(_instance(), time_limit_s=2.0)
    assert plan.solver.status == "greedy"
    assert status in plan.solver.detail
    assert problems(plan, fleet=FLEET) == []
    served = sum(t.admitted_rps for t in plan.tenants)
    assert served > 0  # the greedy plan still routes what fits


def test_a_time_limit_far_too_short_still_yields_a_valid_plan() -> None:
    plan = solve_plan(_instance(), time_limit_s=1e-6)
    assert plan.solver.status in ("optimal", "feasible", "greedy")
    assert problems(plan, fleet=FLEET) == []
