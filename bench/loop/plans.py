"""Step two of the loop: a window of requests → a solved plan, as the planner would make it.

Everything the solve depends on besides the window is fixed per run in :class:`Planning`: the
fleet, tenants' credits, classes' SLOs, capacity at SLO (learned or the roofline prior), the
prefix-group rule and the solver's weights; the ablations change one of them. Demand the fleet
cannot serve at SLO even unloaded is shed as best effort (``shed_unreachable``), and an
infeasible window keeps the previous plan, as the service's planner does; with no plan to keep
(the first solve), it is solved again without the credit floors, and its record says so.

Where replicas may change base model (``ReplicaSpec.models``), each solve first decides the
base model of every replica (:mod:`placement.solver.base_models`, from the window's demand,
starting from what the last plan gave each replica), then solves the plan on the fleet as it
will then be; :attr:`Planning.residency` is what the last plan gave each replica. With
:attr:`Planning.base_models_by_credit` that decision follows the tenants' credits and goodput at
SLO instead of balancing utilisation, its demand read with :attr:`Planning.base_capacity_guard`
as well (the lower capacity of the two).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from placement.domain.fleet import Fleet
from placement.domain.requests import Request, RequestClass, Tenant
from placement.errors import InfeasiblePlan, PlacementError
from placement.plan import Plan
from placement.solver.adapters import place_adapters, with_residency
from placement.solver.base_models import place_base_models, swappable
from placement.solver.base_models import with_residency as fleet_with_models
from placement.solver.capacity import CapacitySource
from placement.solver.instance import WARM_KV_SHARE, build_instance
from placement.solver.prefix_groups import DEFAULT_RULE, GroupRule
from placement.solver.solve import SolveOptions, solve_plan
from placement.whatif.run import summarise_plan

log = logging.getLogger(__name__)

NO_GROUPS = GroupRule(max_groups=0)
CREDITS_DROPPED = " (credit floors dropped: infeasible with no plan to keep)"


@dataclass(frozen=True, slots=True, kw_only=True)
class SolveRecord:
    at_s: float
    reason: str
    status: str  # the solver's status, or "infeasible" / "failed" (the previous plan stays)
    solve_s: float
    churn: float
    version: int | None
    # (replica, group key, prefix tokens) for every prefix the plan keeps warm on a replica
    residency: tuple[tuple[str, int, int], ...] = ()
    # the plan's predicted attainment of the traffic it admits, and the share it sheds
    predicted_attainment: float | None = None
    shed_share: float | None = None
    # (replica, base model) of every replica the plan asks to change base model
    swaps: tuple[tuple[str, str], ...] = ()


@dataclass(kw_only=True)
class Planning:
    fleet: Fleet
    tenants: Mapping[str, Tenant]
    classes: Mapping[str, RequestClass]
    capacity: CapacitySource
    block_tokens: int
    rule: GroupRule = DEFAULT_RULE
    options: SolveOptions = field(default_factory=SolveOptions)
    time_limit_s: float = 10.0
    warm_kv_share: float = WARM_KV_SHARE  # of each replica's KV memory, for warm prefixes
    records: list[SolveRecord] = field(default_factory=list)
    keep_plans: bool = False  # keep every solved plan in ``plans`` (by version)
    plans: dict[int, Plan] = field(default_factory=dict)
    # the plan moves base models where replicas may hold several (False: as the fleet file)
    move_base_models: bool = True
    # each replica's base model under the last plan (empty: as in ``fleet``)
    residency: dict[str, str] = field(default_factory=dict)
    # base models placed by the tenants' credits and goodput at SLO (False: by utilisation)
    base_models_by_credit: bool = False
    # a second capacity source for that decision's demand (the lower capacity wins)
    base_capacity_guard: CapacitySource | None = None
    # what one request costs in the unit credits are charged in, for that decision (None: the
    # replica-time it takes)
    base_price: Callable[[Request], float] | None = None
    # by utilisation, a model's demand is at least the replicas its adapters fill the LoRA
    # slots of (``place_base_models(slots=...)``; off: work read from the capacity only)
    base_models_by_slots: bool = False

    def solve(
        self,
        requests: Sequence[Request],
        *,
        window_s: float,
        at_s: float = 0.0,
        reason: str = "initial",
        unhealthy: Collection[str] = (),
        previous: Plan | None = None,
        horizon_s: float | None = None,
    ) -> Plan | None:
        """The plan for ``requests`` seen over ``window_s`` (None if the solver finds the
        window infeasible; the record says so); ``horizon_s``: until the next plan (a base-model
        swap's cost is spread over it; None: ``window_s``)."""
        started = time.perf_counter()
        said = ""
        fleet = fleet_with_models(self.fleet, self.residency)
        models = self.residency
        if self.move_base_models and swappable(fleet) and requests:
            placed = place_base_models(
                requests,
                fleet,
                self.classes,
                self.capacity,
                window_s=max(window_s, 1e-9),
                horizon_s=max(horizon_s or window_s, 1e-9),
                unhealthy=unhealthy,
                credits=self.tenants if self.base_models_by_credit else None,
                guard=self.base_capacity_guard if self.base_models_by_credit else None,
                price=self.base_price,
                slots=self.base_models_by_slots,
            )
            models = placed.models
            fleet = fleet_with_models(fleet, models)
        try:
            plan = self._solve(requests, self.tenants, window_s, at_s, unhealthy, previous, fleet)
        except InfeasiblePlan as exc:
            if previous is not None:
                self._kept(exc, at_s, reason, started)
                return None
            # no plan to keep: one without the credit floors serves better than none (the
            # record and a log line say so)
            log.warning(
                "solve at %.0f s (%s) is infeasible and there is no plan to keep: solved "
                "without credit floors: %s",
                at_s,
                reason,
                exc,
            )
            said = CREDITS_DROPPED
            try:
                plan = self._solve(requests, {}, window_s, at_s, unhealthy, previous, fleet)
            except PlacementError as again:
                self._kept(again, at_s, reason, started)
                return None
        except PlacementError as exc:  # the solver failed: keep the plan
            self._kept(exc, at_s, reason, started)
            return None
        if any(r.adapter for r in requests):
            held = {r.id: r.adapters for r in previous.replicas} if previous is not None else {}
            residency = place_adapters(
                requests,
                fleet,
                self.classes,
                self.capacity,
                window_s=window_s,
                unhealthy=unhealthy,
                previous=held,
            )
            plan = with_residency(plan, residency)
        swaps = tuple(
            (r.id, models[r.id])
            for r in self.fleet.replicas
            if r.id in models and models[r.id] != self.residency.get(r.id, r.model.name)
        )
        self.residency = dict(models)
        predicted = summarise_plan(plan)
        if self.keep_plans and plan.version is not None:
            self.plans[plan.version] = plan
        self.records.append(
            SolveRecord(
                at_s=at_s,
                reason=reason,
                status=plan.solver.status + said,
                solve_s=time.perf_counter() - started,
                churn=plan.solver.churn,
                version=plan.version,
                residency=tuple(
                    (replica, g.key, g.prefix_tokens) for g in plan.groups for replica in g.warm
                ),
                predicted_attainment=predicted["attainment"],
                shed_share=predicted["shed_share"],
                swaps=swaps,
            )
        )
        return plan

    def _solve(
        self,
        requests: Sequence[Request],
        tenants: Mapping[str, Tenant],
        window_s: float,
        at_s: float,
        unhealthy: Collection[str],
        previous: Plan | None,
        fleet: Fleet,
    ) -> Plan:
        instance = build_instance(
            fleet,
            requests,
            tenants,
            self.classes,
            window_s=window_s,
            capacity=self.capacity,
            block_tokens=self.block_tokens,
            unhealthy=unhealthy,
            rule=self.rule,
            shed_unreachable=True,
            warm_kv_share=self.warm_kv_share,
        )
        return solve_plan(
            instance,
            previous=previous,
            time_limit_s=self.time_limit_s,
            options=self.options,
            created_at=at_s,
        )

    def _kept(self, exc: PlacementError, at_s: float, reason: str, started: float) -> None:
        """Record a solve that gave no plan (infeasible, or the solver failed)."""
        status = "infeasible" if isinstance(exc, InfeasiblePlan) else "failed"
        log.warning(
            "re-solve at %.0f s (%s) kept the previous plan: %s: %s", at_s, reason, status, exc
        )
        self.records.append(
            SolveRecord(
                at_s=at_s,
                reason=reason,
                status=status,
                solve_s=time.perf_counter() - started,
                churn=0.0,
                version=None,
            )
        )
