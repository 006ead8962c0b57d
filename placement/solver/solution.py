"""What a solve returns before it becomes a plan: per model pool, the share of every candidate
(unit, replica) pair, and the bound and status over all pools. :mod:`placement.solver.solve`
produces it; :mod:`placement.solver.extract` turns it into a :class:`~placement.plan.Plan`."""

from __future__ import annotations

from dataclasses import dataclass

from placement.plan.schema import SolverStatus
from placement.solver.instance import BoolArray, FloatArray, IntArray


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSolution:
    model: int
    pair_unit: IntArray
    pair_replica: IntArray
    x: FloatArray  # per pair: share served there (warm + cold)
    util: FloatArray  # per pair: utilisation it adds to the replica
    warm: BoolArray  # per pair: prefix kept warm
    prev: FloatArray
    floor: FloatArray
    cap: FloatArray
    status: SolverStatus
    objective: float
    bound: float
    detail: str = ""  # what the solver said when it did not prove the optimum


@dataclass(frozen=True, slots=True, kw_only=True)
class Solution:
    pools: tuple[PoolSolution, ...]
    status: SolverStatus
    objective: float
    bound: float
    gap: float
    solve_s: float
    backend: str
    detail: str = ""
