"""What this service's planner solves for, and the function its worker process runs.

:class:`ServicePlanning` gives the :class:`~serving.planner.Planner` its callbacks over a
:class:`~serving.service.PlacementService` and a fleet: :meth:`~ServicePlanning.snapshot` on
the event loop (the demand window and the unhealthy replicas, copied), :meth:`~ServicePlanning.
encode` in a thread (the window as pickled chunks, :mod:`serving.demand`), and
:meth:`~ServicePlanning.validate` (:mod:`serving.plan_guard`). :func:`solve_in_worker` decodes
the window, builds the solver instance (loading the capacity model included) and solves, all
in the worker process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from placement.domain.fleet import Fleet
from placement.domain.requests import Tenant
from placement.plan import Plan
from placement.solver.capacity import CapacitySource
from serving.demand import DemandRow, decode_demand, encode_demand
from serving.plan_guard import check_replacement
from serving.planner import SolveSkipped
from serving.service import PlacementService


@dataclass(frozen=True, slots=True)
class DemandSnapshot:
    fleet: Fleet
    demand: list[DemandRow]
    unhealthy: tuple[str, ...]
    capacity: CapacitySource | None = None
    tenants: Mapping[str, Tenant] = field(default_factory=dict)  # the declared ones


@dataclass(frozen=True, slots=True)
class SolveInputs:
    """What is shipped to the worker: small to pickle whatever the window's size."""

    fleet: Fleet
    demand: list[bytes]  # encode_demand's chunks
    unhealthy: tuple[str, ...]
    capacity: CapacitySource | None = None  # None: the champion predictor, else the prior
    tenants: Mapping[str, Tenant] = field(default_factory=dict)  # their credits reach the plan


class ServicePlanning:
    """``capacity`` replaces the capacity at SLO the worker loads (tests: a fixed one)."""

    def __init__(
        self, fleet: Fleet, service: PlacementService, *, capacity: CapacitySource | None = None
    ) -> None:
        self.fleet = fleet
        self.service = service
        self.capacity = capacity

    def snapshot(self) -> DemandSnapshot:
        """The window and the lost replicas (unhealthy or deregistered) as of now;
        :class:`SolveSkipped` when a plan is
        installed and there is nothing to improve it with (no demand yet, no healthy replica)."""
        service = self.service
        plan = service.plan
        window = service.demand
        demand = window.snapshot() if window is not None else []
        states = list(service.replicas.values())
        if plan is not None and not demand:
            raise SolveSkipped(
                f"no demand in the window yet (a restart or a lull): keeping plan {plan.version}"
            )
        if plan is not None and not any(s.healthy for s in states):
            raise SolveSkipped(f"no healthy replica: keeping plan {plan.version}")
        # the solver plans over the fleet file's replicas: those lost or deregistered are out
        serving = {s.id for s in states if s.healthy}
        unhealthy = tuple(r.id for r in self.fleet.replicas if r.id not in serving)
        return DemandSnapshot(
            self.fleet, demand, unhealthy, self.capacity, tenants=dict(service.tenants)
        )

    @staticmethod
    def encode(snapshot: DemandSnapshot) -> SolveInputs:
        return SolveInputs(
            snapshot.fleet,
            encode_demand(snapshot.demand),
            snapshot.unhealthy,
            snapshot.capacity,
            tenants=snapshot.tenants,
        )

    def validate(self, plan: Plan, installed: Plan | None) -> None:
        states = list(self.service.replicas.values())  # one C-level copy: safe from a thread
        check_replacement(plan, installed, replicas={s.id: s.model for s in states})


def solve_in_worker(
    inputs: SolveInputs, *, previous: Plan | None, time_limit_s: float, version: int
) -> Plan:
    """The planner's solve (module level: it is pickled into the worker process)."""
    from placement.solver.instance import build_instance
    from placement.solver.solve import solve_plan

    instance = build_instance(
        inputs.fleet,
        decode_demand(inputs.demand),
        inputs.tenants,
        capacity=inputs.capacity,
        unhealthy=inputs.unhealthy,
        shed_unreachable=True,
    )
    return solve_plan(instance, previous=previous, time_limit_s=time_limit_s, version=version)
