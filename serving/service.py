"""The placement service's domain object: replicas, route path, admission, leases, plan.

The HTTP layer (:mod:`serving.api`) is a thin skin over this; the object itself knows nothing
of HTTP, so it can be driven from tests and tools directly.

A routed request holds a **lease** until its router reports the outcome; a lease that is never
reported expires some time after the request's predicted completion (:mod:`serving.leases`)
and is released as if it had produced its maximum output, so a router that forgets to report
holds in-flight budget for about as long as its requests would have run, and admission bounds
how much of it one tenant can hold (:mod:`serving.admission.admission`).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import check_fits_context, get_model
from placement.domain.requests import DEFAULT_CLASSES, RequestClass, Tenant
from placement.domain.tenancy import Tenancy
from placement.errors import InputError, PlacementError, UnknownModel
from placement.plan import Plan
from serving.activity import Activity
from serving.admission import AdmissionController, class_budgets
from serving.admission.cost import mean_rates
from serving.admission.engine_priority import EnginePriority
from serving.admission.slo_gate import UNREACHABLE, SloGate
from serving.admission.vtc import TokenWeights
from serving.demand import DemandWindow
from serving.leases import Lease, LeaseBook, LeaseTerms
from serving.metrics import ServiceMetrics, TenantUsage
from serving.route.slot_builder import slot_builder
from serving.route.tpot import DecodeTable, decode_table
from serving.route.types import Decision, NoReplica, ReplicaState, RoutePath, RouteQuery
from serving.tracing import DecisionTracer
from serving.usage import UsageBook, slo_met

# a fleet's in-flight budget per replica when nothing better is known (vLLM's max_num_seqs is
# 256; keeping a quarter of it keeps queues short enough for interactive SLOs)
DEFAULT_IN_FLIGHT_PER_REPLICA = 64
SLO_RETRY_AFTER_S = 1  # a request refused for its predicted TTFT may retry after a second
MAX_EXPIRED_PER_CALL = 64  # bound the work an unlucky request does sweeping leases

RoutePathFactory = Callable[[dict[str, ReplicaState]], RoutePath]


class Refused(PlacementError):
    """Admission refused the request: HTTP 429 with Retry-After."""

    def __init__(self, reason: str, retry_after_s: int) -> None:
        self.reason = reason
        self.retry_after_s = retry_after_s
        super().__init__(f"refused ({reason}); retry after {retry_after_s} s")


class UnknownDecision(PlacementError):
    """An outcome for a decision this process did not make (or whose lease expired)."""


class ModelNotAllowed(PlacementError):
    """The tenant may not use the model it asked for (its declared models): HTTP 403."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Routed:
    decision_id: str
    decision: Decision
    # the chosen replica, then the decision's fallbacks that are registered: ids and addresses
    replica_ids: tuple[str, ...]
    addresses: tuple[str, ...]
    # the engine priority to send it with (vLLM ``priority``; None: the replicas schedule
    # FCFS and the body goes as the client sent it)
    priority: int | None = None


# decision_id, decision, replica_ids, addresses, priority: positionally, without the frozen
# dataclass's keyword __init__ (once per decision)
_make_routed: Callable[[str, Decision, tuple[str, ...], tuple[str, ...], int | None], Routed] = (
    slot_builder(Routed)
)


@dataclass(slots=True, kw_only=True)
class ReplicaRegistration:
    """What a replica was registered with, beyond its live state."""

    state: ReplicaState
    metrics_url: str
    scrape_failures: int = 0
    metrics_etag: str | None = None  # the entity tag of the last page read in full
    registered_at: float = field(default_factory=time.time)


class PlacementService:
    def __init__(
        self,
        *,
        route_path_factory: RoutePathFactory,
        admission: AdmissionController | None = None,
        slo_gate: SloGate | None = None,
        metrics: ServiceMetrics | None = None,
        no_plan_fallback: bool = False,
        lease_terms: LeaseTerms | None = None,
        tenants: Mapping[str, Tenant] | None = None,
        reject_unknown_tenants: bool = False,
        in_flight_per_replica: int = DEFAULT_IN_FLIGHT_PER_REPLICA,
        clock: Callable[[], float] = time.monotonic,
        demand_window: int = 0,
        engine_priority: str | None = None,
    ) -> None:
        """``engine_priority``: the replicas schedule by the priority each request is sent
        with (vLLM ``--scheduling-policy priority``), set by class or by class and credit
        standing (:mod:`serving.admission.engine_priority`; None: they schedule FCFS)."""
        self._factory = route_path_factory
        self.replicas: dict[str, ReplicaState] = {}
        self._decode: dict[str, DecodeTable] = {}  # replica → its kind's predicted TPOT
        self.registrations: dict[str, ReplicaRegistration] = {}
        self.route_path: RoutePath = route_path_factory(self.replicas)
        self.admission = admission or AdmissionController(
            classes=class_budgets(fleet_in_flight=in_flight_per_replica),
            fleet_in_flight=in_flight_per_replica,
        )
        self._per_replica = in_flight_per_replica
        # the declared tenants (their credits reach the planner's solves and admission)
        self.tenants: dict[str, Tenant] = dict(tenants or {})
        # the policy for tenants the tenants file does not declare: refused (True), or admitted
        # as newcomers with admission's small floor of the fleet and no credit (False)
        self.reject_unknown_tenants = reject_unknown_tenants and bool(self.tenants)
        self.admission.set_credit_shares(self._declared_shares())
        self.admission.vtc.set_credit_weights(self._declared_shares())
        # admission by predicted TTFT after the decision (None: the in-flight budget alone)
        self.slo_gate = slo_gate
        self.classes: dict[str, RequestClass] = dict(
            slo_gate.classes if slo_gate is not None else DEFAULT_CLASSES
        )
        self.allowed_models: Mapping[str, tuple[str, ...]] = {}  # absent tenant: every model
        self.engine_priority = engine_priority
        self._priorities = self._engine_priorities()
        self._reject_unknown = reject_unknown_tenants
        self.usage = UsageBook()
        self._token_weights = TokenWeights()
        # replicas another service process found unhealthy (as last shared), and this
        # process's own view of each replica
        self.down_elsewhere: frozenset[str] = frozenset()
        self._healthy_here: dict[str, bool] = {}
        self.metrics = metrics or ServiceMetrics()
        self.metrics.tenant_label.declare(self.tenants)
        self.metrics.track_plan(lambda: None if self.plan is None else self.plan.created_at)
        # recent refusals and SLO attainment over time (the dashboard), and a span per decision
        # when traces are exported (serving.tracing; None: none, at no cost)
        self.activity = Activity(label=self.metrics.tenant_label)
        self.tracer: DecisionTracer | None = None
        self.metrics.track_tenants(self.tenant_usage)
        self.metrics.track_solver(
            lambda: (
                None if self.plan is None else (self.plan.solver.status, self.plan.solver.solve_s)
            )
        )
        self.no_plan_fallback = no_plan_fallback
        self.plan: Plan | None = None
        self.lease_terms = lease_terms or LeaseTerms()
        self.clock = clock
        self.leases = LeaseBook()
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid():x}-{int(time.time()):x}-"
        # the recent requests the planner solves for (None: no planner in this process)
        self.demand: DemandWindow | None = (
            DemandWindow(demand_window) if demand_window > 0 else None
        )
        self.metrics.in_flight.set_function(lambda: self.admission.in_flight)
        # listeners told when the replica set changes (the planner re-solves)
        self.on_fleet_change: list[Callable[[str], None]] = []

    # --- plan -------------------------------------------------------------------------------

    def install_plan(self, plan: Plan | None) -> None:
        """Swap in ``plan`` for every later decision (one reference assignment).

        The planner calls this from a thread, so compiling a large plan never holds up the
        event loop: the route path compiles under its own writer lock and swaps one reference
        (``decide`` takes no lock). ``self.plan`` is set first, so a route path rebuilt on the
        loop meanwhile (:meth:`_rebuild`) gets this plan whichever way the two interleave."""
        self.plan = plan
        path = self.route_path
        path.install_plan(plan)
        if self.route_path is not path:
            self.route_path.install_plan(plan)
        self.metrics.plan_version.set(0 if plan is None else plan.version)
        self.metrics.track_capacity_source(None if plan is None else plan.capacity_source)
        if plan is not None and plan.tenants:
            self._apply_credits()

    def _apply_credits(self) -> None:
        # the declared tenants' credits as they stand now (the admin API may have changed one
        # since the plan was solved), the plan's for tenants it credits that are not declared
        plan = self.plan
        shares = {t.tenant: t.guaranteed_share for t in plan.tenants} if plan is not None else {}
        shares.update(self._declared_shares())
        self.admission.set_credit_shares(shares)
        self.admission.vtc.set_credit_weights(shares)
        self.metrics.tenant_label.declare(t for t, share in shares.items() if share > 0)
        if self.slo_gate is not None:
            self.slo_gate.set_credits(shares)

    def _declared_shares(self) -> dict[str, float]:
        return {name: t.credit_share for name, t in self.tenants.items()}

    def credit_shares(self) -> dict[str, float]:
        """Every credited tenant's share as admission applies it."""
        return {t: self.admission.credit_share(t) for t in self.tenants} | {
            t.tenant: self.admission.credit_share(t.tenant)
            for t in (self.plan.tenants if self.plan is not None else ())
        }

    # --- tenants ----------------------------------------------------------------------------

    def apply_tenancy(self, tenancy: Tenancy) -> None:
        """Serve these tenants, credits, request classes and allowed models from the next
        request on (the admin API's edits, or another process's, arrive here)."""
        self.tenants = dict(tenancy.tenants)
        self.allowed_models = dict(tenancy.models)
        self.reject_unknown_tenants = self._reject_unknown and bool(self.tenants)
        self.classes = dict(tenancy.classes)
        self.admission.set_classes(
            class_budgets(self.classes.values(), fleet_in_flight=self.admission.fleet_in_flight)
        )
        if self.slo_gate is not None:
            self.slo_gate.classes = dict(self.classes)
        self._priorities = self._engine_priorities()
        self.metrics.tenant_label.declare(self.tenants)
        self._apply_credits()

    def _engine_priorities(self) -> EnginePriority | None:
        """Priorities by the service's classes, the credit standing its gate's counters give
        (admission's without a gate); None without ``engine_priority``."""
        if self.engine_priority is None:
            return None
        vtc = self.slo_gate.vtc if self.slo_gate is not None else self.admission.vtc
        return EnginePriority(self.classes, mode=self.engine_priority, standing=vtc.over_credit)

    def readiness(self) -> tuple[bool, str]:
        if self.plan is not None:
            return True, f"plan {self.plan.version}"
        if self.no_plan_fallback:
            return True, "no plan: routing by greedy fallback (explicit)"
        return False, "no plan yet"

    # --- replicas ---------------------------------------------------------------------------

    def register_replica(self, state: ReplicaState, *, metrics_url: str | None = None) -> bool:
        """Add or replace a replica; True when it is new."""
        get_accelerator(state.accelerator, field="accelerator")
        # the kind's predicted TPOT, built now rather than on the route path
        self._decode[state.id] = decode_table(state.accelerator, state.model, state.tp)
        new = state.id not in self.replicas
        if not new:  # keep the router's own counters across a re-registration
            old = self.replicas[state.id]
            state.in_flight = old.in_flight
            state.in_flight_prefill_tokens = old.in_flight_prefill_tokens
            state.waiting_prompt_tokens = old.waiting_prompt_tokens
            state.prompts_priced = old.prompts_priced
        url = metrics_url or state.address.rstrip("/") + "/metrics"
        if "://" not in url:
            url = "http://" + url
        self.replicas[state.id] = state
        self.registrations[state.id] = ReplicaRegistration(state=state, metrics_url=url)
        self._rebuild()
        self._fleet_changed(f"replica {state.id} registered")
        return new

    def deregister_replica(self, replica_id: str) -> None:
        if replica_id not in self.replicas:
            raise InputError(f"no replica '{replica_id}'", field="replica_id")
        del self.replicas[replica_id]
        del self._decode[replica_id]
        del self.registrations[replica_id]
        self._healthy_here.pop(replica_id, None)
        self._rebuild()
        self._fleet_changed(f"replica {replica_id} deregistered")

    def mark_health(self, replica_id: str, healthy: bool) -> None:
        """This process's view of a replica (its scrapes); it is routed to only while no
        other process sharing the fleet found it down either."""
        self._healthy_here[replica_id] = healthy
        self._set_health(replica_id, healthy and replica_id not in self.down_elsewhere)

    def _set_health(self, replica_id: str, healthy: bool) -> None:
        state = self.replicas.get(replica_id)
        if state is not None and state.healthy != healthy:
            state.healthy = healthy
            self._fleet_changed(f"replica {replica_id} {'healthy' if healthy else 'lost'}")

    def down_here(self) -> frozenset[str]:
        """The replicas this process's own scrapes found down."""
        return frozenset(r for r, ok in self._healthy_here.items() if not ok)

    def set_down_elsewhere(self, replica_ids: frozenset[str]) -> None:
        """The replicas other service processes found down (as shared)."""
        if replica_ids == self.down_elsewhere:
            return
        self.down_elsewhere = replica_ids
        for replica_id in self.replicas:
            here = self._healthy_here.get(replica_id, True)
            self._set_health(replica_id, here and replica_id not in replica_ids)

    def _rebuild(self) -> None:
        # a route path that can take a new replica set keeps its open requests; any other is
        # rebuilt (it may index the replica set when built)
        set_replicas = getattr(self.route_path, "set_replicas", None)
        if set_replicas is not None:
            set_replicas(list(self.replicas.values()))
        else:
            plan = self.plan
            route_path = self._factory(self.replicas)
            route_path.install_plan(plan)
            self.route_path = route_path
            if self.plan is not plan:  # installed from a thread meanwhile
                route_path.install_plan(self.plan)
        self.admission.set_fleet_capacity(max(1, len(self.replicas)) * self._per_replica)

    def _fleet_changed(self, why: str) -> None:
        # credits are charged in GPU-seconds on the fleet's average replica
        kinds = [(s.accelerator, s.model, s.tp) for s in self.replicas.values()]
        self.admission.set_rates(mean_rates(kinds) if kinds else None)
        for listener in self.on_fleet_change:
            listener(why)

    # --- requests ---------------------------------------------------------------------------

    def route(
        self, query: RouteQuery, *, routed_by: str | None = None, retry: bool = False
    ) -> Routed:
        """Admit and place one request for the caller ``routed_by``. Raises :class:`Refused`
        (429), :class:`NoReplica` (503; :class:`UnservedModel`, 404, when no replica of the
        model is registered) or :class:`InputError` (an unknown request class). A ``retry``
        (a request waiting in a flow-control queue, tried again) refused is not counted as a
        refusal (metrics, its tenant's usage, the gate's counts): it keeps waiting, and the
        queue counts how it ends."""
        started = time.perf_counter()
        _check_fits(query)
        if self.reject_unknown_tenants and query.tenant not in self.tenants:
            raise InputError(
                f"unknown tenant {query.tenant!r}",
                field="tenant",
                expected="a tenant of the service's tenants file (PLACEMENT_UNKNOWN_TENANTS="
                "reject)",
            )
        allowed = self.allowed_models.get(query.tenant)
        if allowed is not None and query.model not in allowed:
            raise ModelNotAllowed(
                f"tenant {query.tenant!r} may not use model {query.model!r} "
                f"(its models: {', '.join(allowed) or 'none'})"
            )
        now = self.clock()
        if self.leases.due(now):
            self._expire(now)
        verdict = self.admission.admit(query.tenant, query.request_class, query.input_tokens, now)
        if not verdict.admitted:
            if not retry:
                self._count_refusal(query, verdict.reason, verdict.retry_after_s)
            raise Refused(verdict.reason, verdict.retry_after_s)
        priorities = self._priorities
        if priorities is not None:
            # the lease keeps this query: the route path's hooks see the priority it went with
            query = replace(query, priority=priorities.of(query.tenant, query.request_class))
        try:
            decision = self.route_path.decide(query, now)
        except NoReplica:
            self.admission.release(query.tenant, query.request_class, 0)
            self._record_refusal(query, "no_replica", 0)
            raise
        gate = self.slo_gate
        if gate is not None:
            admitted = gate.admit_decision(self.route_path, query, decision, now, retry=retry)
            if admitted is None:
                self.admission.release(query.tenant, query.request_class, 0)
                # slo_unreachable: its own prefill misses the class's TTFT SLO on an empty
                # replica — resend it in a class with a longer one
                reason = "slo_unreachable" if gate.last.rule == UNREACHABLE else "slo"
                # the gate's wait until what is queued ahead is prefilled (at least 1 s)
                retry_after_s = max(SLO_RETRY_AFTER_S, gate.retry_after_s)
                if not retry:
                    self._count_refusal(query, reason, retry_after_s)
                raise Refused(reason, retry_after_s)
            decision = admitted
        self.route_path.on_dispatch(decision, query, now)
        decision_id = self._id_prefix + str(next(self._ids))
        expires_at = self._expiry(query, decision, now)
        # positionally: a keyword call of a dataclass's __init__ is dearer (once per decision)
        self.leases.add(
            decision_id, Lease(query, decision.replica_id, expires_at, False, routed_by, now)
        )
        self.usage.routed(
            query.tenant, query.input_tokens, self._token_weights.prefill * query.input_tokens
        )
        replicas = self.replicas
        replica_ids = [decision.replica_id]
        addresses = [decision.address]
        for r in decision.fallbacks:  # those still registered (a loop: no comprehension frames)
            state = replicas.get(r)
            if state is not None:
                replica_ids.append(r)
                addresses.append(state.address)
        if self.demand is not None:
            self.demand.record(query, now)
        elapsed = time.perf_counter() - started
        self.metrics.decision_stats.decided(decision.reason, elapsed)
        if self.tracer is not None:
            self.tracer.decision(query, decision, decision_id, time.time_ns() - int(elapsed * 1e9))
        return _make_routed(
            decision_id,
            decision,
            tuple(replica_ids),
            tuple(addresses),
            None if priorities is None else query.priority,
        )

    def _count_refusal(self, query: RouteQuery, reason: str, retry_after_s: int) -> None:
        """A request refused by admission or the SLO gate: a refusal and a shed request of its
        tenant and class."""
        self._record_refusal(query, reason, retry_after_s)
        self.metrics.count_shed(query.tenant, query.request_class)
        self.usage.refused(query.tenant)

    def _record_refusal(self, query: RouteQuery, reason: str, retry_after_s: int) -> None:
        """Count a refusal, keep it among the recent ones, and trace it."""
        self.metrics.count_refusal(reason)
        self.activity.refused(query.tenant, query.request_class, reason, retry_after_s)
        if self.tracer is not None:
            self.tracer.refusal(query, reason, time.time_ns())

    def _expiry(self, query: RouteQuery, decision: Decision, now: float) -> float:
        """When an unreported lease of this decision expires: its predicted completion, with
        the replica's observed TPOT, or the predicted one before any was observed."""
        state = self.replicas.get(decision.replica_id)
        tpot = 0.0
        if state is not None:
            tpot = state.tpot_s
            if tpot <= 0.0:
                # the larger of the two counts (a conditional, not max(): once per decision)
                scraped, routed = state.num_requests_running, float(state.in_flight)
                tpot = self._decode[state.id].tpot(scraped if scraped > routed else routed)
        lifetime = self.lease_terms.lifetime_s(
            decision.predicted_ttft_s, query.max_output_tokens, tpot
        )
        return now + lifetime

    def lease(self, decision_id: str) -> Lease:
        lease = self.leases.get(decision_id)
        if lease is None:
            raise UnknownDecision(f"no decision '{decision_id}' in flight here")
        return lease

    def first_token(self, decision_id: str) -> None:
        lease = self.lease(decision_id)
        if not lease.first_token:
            lease.first_token = True
            now = self.clock()
            self.route_path.on_first_token(lease.replica_id, lease.query, now)
            if self.slo_gate is not None:  # a reported first token calibrates the forecast
                self.slo_gate.first_token(lease.query, now)

    def redirect(self, decision_id: str, replica_id: str) -> None:
        """A proxy sent the request on to another replica (a fallback, after a failure before
        the first byte): its in-flight count and lease move there."""
        lease = self.lease(decision_id)
        state = self.replicas.get(replica_id)
        if state is None or replica_id == lease.replica_id:
            return
        now = self.clock()
        self.route_path.on_complete(lease.replica_id, lease.query, now, ok=False)
        moved = Decision(
            replica_id=replica_id,
            address=state.address,
            reason="fallback:retry",
            plan_version=self.plan.version if self.plan is not None else None,
            predicted_ttft_s=0.0,
        )
        self.route_path.on_dispatch(moved, lease.query, now)
        lease.replica_id = replica_id

    def complete(
        self,
        decision_id: str,
        *,
        output_tokens: int,
        ok: bool,
        ttft_s: float | None = None,
        tpot_s: float | None = None,
    ) -> Lease:
        """The request finished: release its lease, charge its decode tokens, count it in its
        tenant's usage (judged against its class's SLO when ``ttft_s`` is known; without a
        ``tpot_s``, its TPOT is taken from the time since it was routed)."""
        lease = self.lease(decision_id)
        self.leases.pop(decision_id)
        self._release(lease, output_tokens, ok=ok)
        query = lease.query
        if tpot_s is None and ttft_s is not None and output_tokens > 1:
            decode_s = self.clock() - lease.routed_at - ttft_s
            tpot_s = max(0.0, decode_s) / (output_tokens - 1)
        met = slo_met(self.classes.get(query.request_class), ok=ok, ttft_s=ttft_s, tpot_s=tpot_s)
        if met is not None:
            self.activity.outcome(query.tenant, met=met)
            self.metrics.count_slo(query.tenant, query.request_class, met=met)
        self.usage.completed(
            query.tenant,
            output_tokens=output_tokens,
            charged=self._token_weights.decode * output_tokens,
            ok=ok,
            met=met,
        )
        return lease

    def _release(self, lease: Lease, output_tokens: int, *, ok: bool) -> None:
        now = self.clock()
        query = lease.query
        # a first token never reported: on_complete releases the prompt's wait with the rest
        self.route_path.on_complete(
            lease.replica_id, query, now, ok=ok, output_tokens=output_tokens
        )
        self.admission.release(query.tenant, query.request_class, output_tokens, query.input_tokens)
        if self.slo_gate is not None:
            self.slo_gate.finished(query.tenant, output_tokens if ok else 0, query, now)

    def _expire(self, now: float) -> None:
        """Release the leases due by ``now`` (some are: :meth:`LeaseBook.due`)."""
        expired = self.leases.expired(now, MAX_EXPIRED_PER_CALL)
        self.metrics.decision_stats.lease_expiries += len(expired)
        for lease in expired:
            self._release(lease, lease.query.max_output_tokens, ok=True)

    def tenant_usage(self) -> list[TenantUsage]:
        """Each tenant label's credit, entitlement, use and SLO attainment (declared and credited
        tenants and those holding requests; every other name under one bounded label)."""
        admission = self.admission
        names = {*self.tenants, *self._declared_shares(), *admission.in_flight_by_tenant}
        held: dict[str, int] = {}
        for name in names:
            label = self.metrics.tenant_label(name)
            held[label] = held.get(label, 0) + admission.in_flight_by_tenant.get(name, 0)
        attainment = self.activity.attainment()
        return [
            TenantUsage(
                tenant=label,
                credit_share=admission.credit_share(label),
                entitlement=admission.entitlement(label),
                in_flight=n,
                service_tokens=admission.vtc.counter(label),
                slo_attainment=attainment.get(label),
            )
            for label, n in sorted(held.items())
        ]

    def credit_counters(self) -> Mapping[str, float]:
        return self.admission.vtc.snapshot()


def _check_fits(query: RouteQuery) -> None:
    """A request longer than its model's context window is bad input (no replica could serve
    it), not demand: it never reaches admission, the route path or the planner's window."""
    if not query.model:
        return
    try:
        model = get_model(query.model)
    except UnknownModel:
        return  # the route path answers 404 for a model no replica serves
    check_fits_context(model, query.input_tokens, query.max_output_tokens)
