"""Plans: the solver's published output and the route path's input."""

from placement.plan.schema import (
    PLAN_SCHEMA,
    AdapterRoute,
    ClassOutcome,
    DefaultRoute,
    Plan,
    PrefixGroupRoute,
    ReplicaPlan,
    Route,
    SolverReport,
    TenantPlan,
)

__all__ = [
    "PLAN_SCHEMA",
    "AdapterRoute",
    "ClassOutcome",
    "DefaultRoute",
    "Plan",
    "PrefixGroupRoute",
    "ReplicaPlan",
    "Route",
    "SolverReport",
    "TenantPlan",
]
