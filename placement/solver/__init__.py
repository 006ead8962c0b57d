"""The placement solver: instance → model → solve → extract (→ :mod:`placement.plan`)."""

from placement.solver.capacity import CapacitySource, FixedCapacity, TableCapacity, default_capacity
from placement.solver.instance import Instance, build_instance
from placement.solver.model import Weights
from placement.solver.prefix_groups import GroupRule
from placement.solver.solve import SolveOptions, SolverFailed, solve_instance, solve_plan

__all__ = [
    "CapacitySource",
    "FixedCapacity",
    "GroupRule",
    "Instance",
    "SolveOptions",
    "SolverFailed",
    "TableCapacity",
    "Weights",
    "build_instance",
    "default_capacity",
    "solve_instance",
    "solve_plan",
]
