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

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from placement.domain.fleet import Fleet
from placement.domain.requests import DEFAULT_CLASSES, RequestClass, Tenant
from placement.plan import Plan
from placement.solver.capacity import CapacitySource
from placement.solver.pooled_attainment import AttainmentModel
from serving.demand import DemandRow, decode_demand, encode_demand, rows_of_shared
from serving.plan_guard import check_replacement
from serving.planner import SolveSkipped
from serving.service import PlacementService

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DemandSnapshot:
    fleet: Fleet
    demand: list[DemandRow]
    unhealthy: tuple[str, ...]
    capacity: CapacitySource | None = None
    tenants: Mapping[str, Tenant] = field(default_factory=dict)  # the declared ones
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))


@dataclass(frozen=True, slots=True)
class SolveInputs:
    """What is shipped to the worker: small to pickle whatever the window's size."""

    fleet: Fleet
    demand: list[bytes]  # encode_demand's chunks
    unhealthy: tuple[str, ...]
    capacity: CapacitySource | None = None  # None: the champion predictor, else the prior
    tenants: Mapping[str, Tenant] = field(default_factory=dict)  # their credits reach the plan
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    attainment: AttainmentModel = "replica"  # the model of the plan's predicted attainment


class ServicePlanning:
    """``capacity`` replaces the capacity at SLO the worker loads (tests: a fixed one);
    ``shared_demand`` reads every process's recent requests (Redis), solved for instead of this
    process's own window whenever it answers; ``attainment`` is the model of the plans'
    predicted attainment, the one that matches the service's route path
    (:func:`~placement.solver.pooled_attainment.attainment_for` its profile's plan picker)."""

    def __init__(
        self,
        fleet: Fleet,
        service: PlacementService,
        *,
        capacity: CapacitySource | None = None,
        shared_demand: Callable[[], list[bytes]] | None = None,
        window: int = 50_000,
        attainment: AttainmentModel = "replica",
    ) -> None:
        self.fleet = fleet
        self.attainment = attainment
        self.service = service
        self.capacity = capacity
        self.shared_demand = shared_demand
        self.window = window

    def snapshot(self) -> DemandSnapshot:
        """The window and the lost replicas (unhealthy or deregistered) as of now;
        :class:`SolveSkipped` when a plan is
        installed and there is nothing to improve it with (no demand yet, no healthy replica)."""
        service = self.service
        plan = service.plan
        window = service.demand
        demand = window.snapshot() if window is not None else []
        states = list(service.replicas.values())
        if plan is not None and not demand and self.shared_demand is None:
            raise SolveSkipped(
                f"no demand in the window yet (a restart or a lull): keeping plan {plan.version}"
            )
        if plan is not None and not any(s.healthy for s in states):
            raise SolveSkipped(f"no healthy replica: keeping plan {plan.version}")
        # the solver plans over the fleet file's replicas: those lost or deregistered are out
        serving = {s.id for s in states if s.healthy}
        unhealthy = tuple(r.id for r in self.fleet.replicas if r.id not in serving)
        return DemandSnapshot(
            self.fleet,
            demand,
            unhealthy,
            self.capacity,
            tenants=dict(service.tenants),
            classes=dict(service.classes),
        )

    def encode(self, snapshot: DemandSnapshot) -> SolveInputs:
        """The snapshot for the worker (in a thread): with shared demand, every process's
        recent requests, else (or while Redis does not answer) this process's own."""
        rows = snapshot.demand
        if self.shared_demand is not None:
            try:
                rows = rows_of_shared(self.shared_demand(), limit=self.window)
            except Exception as exc:  # redis down, a damaged chunk: plan on what is known here
                log.warning("solving for this process's demand only: %s", exc)
            if not rows and self.service.plan is not None:  # as snapshot() says without Redis
                raise SolveSkipped("no demand in any process's window yet: keeping the plan")
        return SolveInputs(
            snapshot.fleet,
            encode_demand(rows),
            snapshot.unhealthy,
            snapshot.capacity,
            tenants=snapshot.tenants,
            classes=snapshot.classes,
            attainment=self.attainment,
        )

    def validate(self, plan: Plan, installed: Plan | None) -> None:
        states = list(self.service.replicas.values())  # one C-level copy: safe from a thread
        check_replacement(plan, installed, replicas={s.id: s.model for s in states})


def solve_in_worker(
    inputs: SolveInputs, *, previous: Plan | None, time_limit_s: float, version: int
) -> Plan:
    """The planner's solve (module level: it is pickled into the worker process)."""
    from placement.solver.instance import build_instance
    from placement.solver.solve import SolveOptions, solve_plan

    # a class removed since the requests were routed is no longer planned for
    demand = [r for r in decode_demand(inputs.demand) if r.request_class in inputs.classes]
    instance = build_instance(
        inputs.fleet,
        demand,
        inputs.tenants,
        inputs.classes,
        capacity=inputs.capacity,
        unhealthy=inputs.unhealthy,
        shed_unreachable=True,
    )
    return solve_plan(
        instance,
        previous=previous,
        time_limit_s=time_limit_s,
        version=version,
        options=SolveOptions(attainment=inputs.attainment),
    )
