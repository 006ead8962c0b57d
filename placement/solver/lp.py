"""A linear program as numpy arrays (maximise ``c·x`` s.t. ``row_lb ≤ A x ≤ row_ub``,
``lb ≤ x ≤ ub``, some ``x`` integer) and the backends that solve it.

Keeping the program solver-neutral lets the same model be handed to MathOpt (HiGHS, GLOP,
PDLP, SCIP — built straight into a ``ModelProto`` from the arrays, no per-variable Python
calls) or to CP-SAT (integer-scaled), which is how the backends were measured against each
other (bench/RESULTS.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Literal

import numpy as np

from placement.solver.instance import BoolArray, FloatArray, IntArray

#: What a solve ended with, whatever the backend: a proven optimum; a feasible solution (a
#: limit stopped it); proven infeasible; no solution in the time limit; a solution the solver
#: could not certify (``imprecise``) or a numerical failure (both worth another backend); an
#: invalid model (a bug: the programs here are bounded and finite by construction).
LpStatus = Literal[
    "optimal",
    "feasible",
    "infeasible",
    "no_solution",
    "imprecise",
    "numerical_error",
    "model_invalid",
]
BACKENDS = ("mathopt-highs", "mathopt-glop", "mathopt-pdlp", "mathopt-scip", "cp-sat")

# Simplex basis statuses, as MathOpt numbers them (``BasisStatusProto``).
AT_LOWER = 2
AT_UPPER = 3
FIXED = 4
BASIC = 5


@dataclass(frozen=True, slots=True)
class Basis:
    """A starting simplex basis: a status per column and per row (a row's status is its
    slack's: ``AT_UPPER`` where the row is tight at its upper bound). Exactly as many
    ``BASIC`` entries as rows, else MathOpt rejects it."""

    column: IntArray
    row: IntArray


@dataclass(slots=True)
class LinearProgram:
    """Columns and rows in COO form; ``hint`` is a starting point for integer programs and
    ``basis`` a starting basis for the simplex (GLOP only; None: none)."""

    lb: FloatArray
    ub: FloatArray
    obj: FloatArray
    integer: BoolArray
    row_lb: FloatArray
    row_ub: FloatArray
    rows: IntArray
    cols: IntArray
    vals: FloatArray
    hint: FloatArray | None = None
    basis: Basis | None = None

    @property
    def n_vars(self) -> int:
        return len(self.lb)

    @property
    def n_rows(self) -> int:
        return len(self.row_lb)


@dataclass(frozen=True, slots=True)
class LpResult:
    status: LpStatus
    x: FloatArray  # empty unless a solution was found
    objective: float
    bound: float  # the solver's dual bound (inf when unknown)
    solve_s: float
    detail: str = ""
    extra: dict[str, float] = field(default_factory=dict)


class RowBuilder:
    """Collects rows block by block (each block vectorised) before one concatenation."""

    def __init__(self) -> None:
        self._rows: list[IntArray] = []
        self._cols: list[IntArray] = []
        self._vals: list[FloatArray] = []
        self._lb: list[FloatArray] = []
        self._ub: list[FloatArray] = []
        self.n = 0

    def add(
        self, row: IntArray, col: IntArray, val: FloatArray, lb: FloatArray, ub: FloatArray
    ) -> int:
        """Rows ``self.n + row`` (``row`` local, 0 … len(lb) − 1); returns the first row id."""
        first = self.n
        self._rows.append(row.astype(np.int64) + first)
        self._cols.append(col.astype(np.int64))
        self._vals.append(val.astype(np.float64))
        self._lb.append(lb.astype(np.float64))
        self._ub.append(ub.astype(np.float64))
        self.n += len(lb)
        return first

    def arrays(self) -> tuple[FloatArray, FloatArray, IntArray, IntArray, FloatArray]:
        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        return (
            cat(self._lb, np.float64),
            cat(self._ub, np.float64),
            cat(self._rows, np.int64),
            cat(self._cols, np.int64),
            cat(self._vals, np.float64),
        )


def solve(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
    """Solve with one of :data:`BACKENDS`; never prints, never raises on a solver status."""
    if backend == "cp-sat":
        return _solve_cpsat(lp, time_limit_s)
    if backend.startswith("mathopt-"):
        return _solve_mathopt(lp, backend.removeprefix("mathopt-"), time_limit_s)
    raise ValueError(f"unknown backend {backend!r}")


def _model_proto(lp: LinearProgram) -> object:
    from ortools.math_opt import model_pb2

    n = lp.n_vars
    proto = model_pb2.ModelProto()
    v = proto.variables
    v.ids.extend(range(n))
    v.lower_bounds.extend(lp.lb.tolist())
    v.upper_bounds.extend(lp.ub.tolist())
    v.integers.extend(lp.integer.tolist())
    proto.objective.maximize = True
    nz = np.flatnonzero(lp.obj)
    proto.objective.linear_coefficients.ids.extend(nz.tolist())
    proto.objective.linear_coefficients.values.extend(lp.obj[nz].tolist())
    c = proto.linear_constraints
    c.ids.extend(range(lp.n_rows))
    c.lower_bounds.extend(lp.row_lb.tolist())
    c.upper_bounds.extend(lp.row_ub.tolist())
    # the matrix must be sorted by (row, column)
    order = np.lexsort((lp.cols, lp.rows))
    m = proto.linear_constraint_matrix
    m.row_ids.extend(lp.rows[order].tolist())
    m.column_ids.extend(lp.cols[order].tolist())
    m.coefficients.extend(lp.vals[order].tolist())
    return proto


#: MathOpt's ``TerminationReasonProto`` by number, every value (a test walks the enum).
MATHOPT_TERMINATION: dict[int, LpStatus] = {
    0: "model_invalid",  # UNSPECIFIED: never a real answer
    1: "optimal",
    2: "infeasible",
    3: "model_invalid",  # UNBOUNDED: every program here is bounded, so this is a bug
    4: "infeasible",  # INFEASIBLE_OR_UNBOUNDED: and it is bounded
    5: "imprecise",
    6: "no_solution",  # NO_SOLUTION_FOUND: a limit stopped it first
    7: "numerical_error",
    8: "numerical_error",  # OTHER_ERROR: the solver failed, another one may not
    9: "feasible",  # FEASIBLE: a limit stopped it with a solution
}

#: CP-SAT's ``CpSolverStatus`` by number, every value.
CPSAT_STATUS: dict[int, LpStatus] = {
    0: "no_solution",  # UNKNOWN: the time limit came first
    1: "model_invalid",
    2: "feasible",
    3: "infeasible",
    4: "optimal",
}


def _solve_mathopt(lp: LinearProgram, solver_name: str, time_limit_s: float) -> LpResult:
    from ortools.math_opt import (
        callback_pb2,
        model_parameters_pb2,
        parameters_pb2,
    )
    from ortools.math_opt.core.python import solver
    from ortools.math_opt.python import parameters as mp

    types = {
        "highs": mp.SolverType.HIGHS,
        "glop": mp.SolverType.GLOP,
        "pdlp": mp.SolverType.PDLP,
        "scip": mp.SolverType.GSCIP,
    }
    if solver_name not in types:
        raise ValueError(f"unknown MathOpt solver {solver_name!r}")
    t0 = time.perf_counter()
    proto = _model_proto(lp)
    params = mp.SolveParameters(
        time_limit=timedelta(seconds=max(time_limit_s, 0.01)),
        relative_gap_tolerance=1e-4,
    ).to_proto()
    if solver_name == "pdlp":
        params.pdlp.termination_criteria.simple_optimality_criteria.eps_optimal_relative = 1e-6
    model_params = model_parameters_pb2.ModelSolveParametersProto()
    if lp.hint is not None and lp.integer.any():
        hint = model_parameters_pb2.SolutionHintProto()
        hint.variable_values.ids.extend(range(lp.n_vars))
        hint.variable_values.values.extend(lp.hint.tolist())
        model_params.solution_hints.append(hint)
    if lp.basis is not None and solver_name == "glop":
        basis = model_params.initial_basis
        basis.variable_status.ids.extend(range(lp.n_vars))
        basis.variable_status.values.extend(lp.basis.column.tolist())
        basis.constraint_status.ids.extend(range(lp.n_rows))
        basis.constraint_status.values.extend(lp.basis.row.tolist())
    try:
        result = solver.solve(
            proto,
            types[solver_name].value,
            parameters_pb2.SolverInitializerProto(),
            params,
            model_params,
            None,
            callback_pb2.CallbackRegistrationProto(),
            None,
            None,
        )
    except Exception as exc:  # the binding raises StatusNotOk on an invalid model
        if lp.basis is not None and solver_name == "glop":
            # a starting basis is only a head start: one MathOpt rejects is dropped
            left = time_limit_s - (time.perf_counter() - t0)
            return _solve_mathopt(replace(lp, basis=None), solver_name, left)
        return LpResult("model_invalid", np.zeros(0), math.nan, math.inf, 0.0, str(exc))
    elapsed = time.perf_counter() - t0
    term = result.termination
    status = MATHOPT_TERMINATION.get(term.reason, "model_invalid")
    detail = term.detail or f"termination reason {term.reason}"
    if status in ("imprecise", "numerical_error", "model_invalid"):
        return LpResult(status, np.zeros(0), math.nan, math.inf, elapsed, detail)
    bound = term.objective_bounds.dual_bound
    x = np.zeros(lp.n_vars)
    primal = [s.primal_solution for s in result.solutions if s.HasField("primal_solution")]
    if status in ("optimal", "feasible") and primal:
        vals = primal[0].variable_values
        x[np.asarray(vals.ids, dtype=np.int64)] = np.asarray(vals.values)
        objective = float(lp.obj @ x)
    else:
        if status == "feasible":
            status = "no_solution"
        return LpResult(status, np.zeros(0), math.nan, bound, elapsed, detail)
    return LpResult(status, x, objective, max(bound, objective), elapsed, term.detail)


# CP-SAT works on integers: x in 1/_CPSAT_UNITS of its range, coefficients scaled and rounded.
_CPSAT_UNITS = 100
_CPSAT_OBJ_SCALE = 1e6
_CPSAT_ROW_SCALE = 1e4


def _solve_cpsat(lp: LinearProgram, time_limit_s: float) -> LpResult:
    """Integer-scaled CP-SAT solve. Continuous columns become integers in 1/100 steps of their
    range (columns must have finite bounds); rows are scaled and rounded *conservatively*
    (coefficients up for ≤ rows, the bound down) so a CP-SAT solution is feasible for the LP."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    scale = np.where(lp.integer, 1.0, (lp.ub - lp.lb) / _CPSAT_UNITS)
    scale = np.where(scale > 0, scale, 1.0)
    model = cp_model.CpModel()
    ub_int = np.where(lp.integer, lp.ub, _CPSAT_UNITS).astype(np.int64)
    lb_int = np.where(lp.integer, lp.lb, 0).astype(np.int64)
    xs = [model.new_int_var(int(lo), int(hi), "") for lo, hi in zip(lb_int, ub_int, strict=True)]
    order = np.argsort(lp.rows, kind="stable")
    rows, cols, vals = lp.rows[order], lp.cols[order], lp.vals[order] * scale[lp.cols[order]]
    # x = lb + scale·xi for continuous columns: the lb part moves to the row bounds
    offset = lp.vals[order] * np.where(lp.integer, 0.0, lp.lb)[cols]
    starts = np.searchsorted(rows, np.arange(lp.n_rows + 1))
    for i in range(lp.n_rows):
        a, b = starts[i], starts[i + 1]
        if a == b:
            continue
        base = float(offset[a:b].sum())
        lo, hi = lp.row_lb[i] - base, lp.row_ub[i] - base
        coef = vals[a:b] * _CPSAT_ROW_SCALE
        vars_ = [xs[j] for j in cols[a:b]]
        if np.isfinite(hi) and np.isfinite(lo):
            # an equality or a range: keep it exact only if the coefficients are integral
            model.add_linear_constraint(
                cp_model.LinearExpr.weighted_sum(vars_, np.rint(coef).astype(int).tolist()),
                math.ceil(lo * _CPSAT_ROW_SCALE - 1e-6),
                math.floor(hi * _CPSAT_ROW_SCALE + 1e-6),
            )
        elif np.isfinite(hi):
            model.add(
                cp_model.LinearExpr.weighted_sum(vars_, np.ceil(coef).astype(int).tolist())
                <= math.floor(hi * _CPSAT_ROW_SCALE + 1e-6)
            )
        elif np.isfinite(lo):
            model.add(
                cp_model.LinearExpr.weighted_sum(vars_, np.floor(coef).astype(int).tolist())
                >= math.ceil(lo * _CPSAT_ROW_SCALE - 1e-6)
            )
    obj_scale = _CPSAT_OBJ_SCALE / max(float(np.abs(lp.obj * scale).max(initial=1.0)), 1e-12)
    obj = np.rint(lp.obj * scale * obj_scale).astype(int)
    model.maximize(cp_model.LinearExpr.weighted_sum(xs, obj.tolist()))
    if lp.hint is not None:
        hint = np.rint((lp.hint - np.where(lp.integer, 0, lp.lb)) / scale).astype(int)
        for v, h, lo, hi in zip(xs, hint, lb_int, ub_int, strict=True):
            model.add_hint(v, int(min(max(h, lo), hi)))
    cp = cp_model.CpSolver()
    cp.parameters.max_time_in_seconds = max(time_limit_s, 0.01)
    cp.parameters.num_workers = 2
    code = cp.solve(model)
    elapsed = time.perf_counter() - t0
    status = CPSAT_STATUS.get(int(code), "model_invalid")
    if status not in ("optimal", "feasible"):
        return LpResult(status, np.zeros(0), math.nan, math.inf, elapsed, cp.status_name(code))
    xi = np.asarray([cp.value(v) for v in xs], dtype=np.float64)
    x = np.where(lp.integer, xi, lp.lb + xi * scale)
    bound = cp.best_objective_bound / obj_scale + float(lp.obj @ np.where(lp.integer, 0.0, lp.lb))
    objective = float(lp.obj @ x)
    return LpResult(status, x, objective, max(bound, objective), elapsed)
