"""The service's own Prometheus metrics, in one registry per service (tests run many).

Label values that come from clients are bounded: each new value is a new series, so a client
sending a new tenant name per request would otherwise grow ``/metrics`` without end. A tenant
label is the tenant's name only for declared tenants (the tenants file, tenant-scoped API keys,
credited tenants of a plan), and every other name is counted under ``other``; and no label fed
by input takes more than :data:`MAX_LABEL_VALUES` distinct values (the rest fold into
``other`` too).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from placement.plan.capacity_source import parse_model_source
from training.tracking import CHAMPION

# decisions take microseconds; the buckets resolve 10 µs … 50 ms
DECISION_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2)
SOLVE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# placement_model_version when the installed plan's capacities came from the champion but the
# plan predates recorded versions ("models:/placement-latency@champion")
UNRECORDED_VERSION = -1

OTHER = "other"
MAX_LABEL_VALUES = 200  # distinct values of one input-fed label, ``other`` included


class BoundedLabel:
    """The values one label may take: ``known`` names (all of them, when ``known`` is None)
    up to ``cap`` distinct values, and :data:`OTHER` for everything else."""

    def __init__(self, *, cap: int = MAX_LABEL_VALUES, known: Iterable[str] | None = ()) -> None:
        self.cap = cap
        self._known: set[str] | None = None if known is None else set(known)
        self._seen: set[str] = set()

    def declare(self, names: Iterable[str]) -> None:
        """Let ``names`` be label values (a no-op for a label open to every value)."""
        if self._known is not None:
            self._known.update(names)

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if self._known is not None and value not in self._known:
            return OTHER
        if len(self._seen) >= self.cap - 1:  # keep one value for ``other``
            return OTHER
        self._seen.add(value)
        return value


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """One tenant label's figures at scrape time."""

    tenant: str
    credit_share: float  # of fleet capacity (0: no credit)
    entitlement: int  # requests in flight its credit entitles it to
    in_flight: int
    service_tokens: float  # its virtual token counter (weighted tokens served)
    slo_attainment: float | None  # share of its reported outcomes within SLO


class _TenantCollector(Collector):
    """Per-tenant gauges read from the service when scraped (nothing on the route path)."""

    def __init__(self, usage: Callable[[], Iterable[TenantUsage]]) -> None:
        self.usage = usage

    def collect(self) -> Iterator[Metric]:
        share = GaugeMetricFamily(
            "placement_tenant_credit_share",
            "Credit as a share of fleet capacity",
            labels=["tenant"],
        )
        entitled = GaugeMetricFamily(
            "placement_tenant_entitlement",
            "Requests in flight the tenant's credit entitles it to",
            labels=["tenant"],
        )
        held = GaugeMetricFamily(
            "placement_tenant_in_flight", "Admitted requests in flight", labels=["tenant"]
        )
        used = GaugeMetricFamily(
            "placement_tenant_credit_used",
            "Requests in flight over the entitlement (1: all of its credit in use)",
            labels=["tenant"],
        )
        tokens = GaugeMetricFamily(
            "placement_tenant_service_tokens",
            "The tenant's virtual token counter (prefill and decode tokens served, weighted)",
            labels=["tenant"],
        )
        slo = GaugeMetricFamily(
            "placement_tenant_slo_attainment",
            "Share of the tenant's reported outcomes within their class's SLOs (TTFT and TPOT)",
            labels=["tenant"],
        )
        for u in self.usage():
            share.add_metric([u.tenant], u.credit_share)
            entitled.add_metric([u.tenant], u.entitlement)
            held.add_metric([u.tenant], u.in_flight)
            used.add_metric([u.tenant], u.in_flight / max(1, u.entitlement))
            tokens.add_metric([u.tenant], u.service_tokens)
            if u.slo_attainment is not None:
                slo.add_metric([u.tenant], u.slo_attainment)
        yield from (share, entitled, held, used, tokens, slo)


class _SolverCollector(Collector):
    """The installed plan's solver report: status (one series set to 1) and solve time."""

    def __init__(self, report: Callable[[], tuple[str, float] | None]) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        status = GaugeMetricFamily(
            "placement_plan_solver_status",
            "The installed plan's solver status (the series at 1)",
            labels=["status"],
        )
        seconds = GaugeMetricFamily(
            "placement_plan_solver_seconds", "Solver time of the installed plan (-1: no plan)"
        )
        got = self.report()
        if got is None:
            seconds.add_metric([], -1.0)
        else:
            status.add_metric([got[0]], 1.0)
            seconds.add_metric([], got[1])
        yield from (status, seconds)


class DecisionStats(Collector):
    """The per-decision series (decisions by reason, decision latency, unreported leases)
    as plain counts, exposed when scraped: a ``prometheus_client`` metric takes a lock and a
    few calls per update, a large share of a decision of tens of microseconds. The service
    updates them from its one event-loop thread."""

    def __init__(self, buckets: tuple[float, ...] = DECISION_BUCKETS) -> None:
        self.bounds = buckets
        self.by_reason: dict[str, int] = {}
        self.latency_buckets = [0] * (len(buckets) + 1)  # per bucket, not cumulative; +Inf last
        self.latency_sum = 0.0
        self.lease_expiries = 0

    def decided(self, reason: str, seconds: float) -> None:
        """One decision by ``reason`` that took ``seconds``."""
        by_reason = self.by_reason
        by_reason[reason] = by_reason.get(reason, 0) + 1
        self.latency_buckets[bisect_left(self.bounds, seconds)] += 1
        self.latency_sum += seconds

    def collect(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily(
            "placement_decisions",
            "Route decisions by reason (plan or fallback:<why>)",
            labels=["reason"],
        )
        for reason, n in sorted(self.by_reason.items()):
            decisions.add_metric([reason], n)
        yield decisions
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, n in zip((*self.bounds, float("inf")), self.latency_buckets, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        latency = HistogramMetricFamily(
            "placement_decision_latency_seconds",
            "Service time of one route decision (admission and route path)",
        )
        latency.add_metric([], buckets, self.latency_sum)
        yield latency
        expiries = CounterMetricFamily(
            "placement_lease_expiries",
            "Leases released unreported, after their request's predicted completion",
        )
        expiries.add_metric([], self.lease_expiries)
        yield expiries


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decision_stats = DecisionStats()
        self.registry.register(self.decision_stats)
        self.refusals = Counter(
            "placement_refusals",
            "Requests refused: shed or over budget (429), nothing can serve (503)",
            ["reason"],
            registry=self.registry,
        )
        self.shed = Counter(
            "placement_shed",
            "Requests shed by admission (429), by tenant and request class",
            ["tenant", "request_class"],
            registry=self.registry,
        )
        self._refusal_children: dict[str, Counter] = {}
        # tenants: declared ones only; request classes and replicas: any, up to the cap
        self.tenant_label = BoundedLabel()
        self.class_label = BoundedLabel(known=None)
        self.replica_label = BoundedLabel(known=None)
        self.solve_time = Histogram(
            "placement_solve_seconds",
            "Wall time of a planner solve, including the worker round trip",
            ["result"],
            buckets=SOLVE_BUCKETS,
            registry=self.registry,
        )
        self.plan_version = Gauge(
            "placement_plan_version",
            "Version of the installed plan (0: none)",
            registry=self.registry,
        )
        self.plan_age = Gauge(
            "placement_plan_age_seconds",
            "Seconds since the installed plan was created (-1: no plan)",
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "placement_in_flight", "Admitted requests not yet completed", registry=self.registry
        )
        self.model_version = Gauge(
            "placement_model_version",
            "Version of placement-latency the installed plan's capacities came from, by the alias "
            f"it was loaded by (0: not that alias's model: roofline prior or no plan; "
            f"{UNRECORDED_VERSION}: a plan that did not record the version)",
            ["alias"],
            registry=self.registry,
        )
        self.model_version.labels(alias=CHAMPION).set(0)
        self.slo_outcomes = Counter(
            "placement_slo_outcomes",
            "Reported outcomes by tenant, request class and whether they met their class's SLOs",
            ["tenant", "request_class", "result"],
            registry=self.registry,
        )
        self.retrain_time = Histogram(
            "placement_retrain_seconds",
            "Wall time of a scheduled retraining (train, score against the champion, promote "
            "or keep), by result: promoted, kept, skipped (too little telemetry), failed",
            ["result"],
            buckets=SOLVE_BUCKETS,
            registry=self.registry,
        )
        self.scrape_failures = Counter(
            "placement_scrape_failures",
            "Failed scrapes of a replica's /metrics",
            ["replica"],
            registry=self.registry,
        )

    def track_capacity_source(self, capacity_source: str | None) -> None:
        """Set ``placement_model_version{alias="champion"}`` from the installed plan's
        ``capacity_source`` (None: no plan)."""
        source = None if capacity_source is None else parse_model_source(capacity_source)
        version = 0
        if source is not None and source.alias == CHAMPION:
            version = UNRECORDED_VERSION if source.version is None else source.version
        self.model_version.labels(alias=CHAMPION).set(version)

    def count_refusal(self, reason: str) -> None:
        child = self._refusal_children.get(reason)
        if child is None:
            child = self._refusal_children[reason] = self.refusals.labels(reason)
        child.inc()

    def count_shed(self, tenant: str, request_class: str) -> None:
        self.shed.labels(self.tenant_label(tenant), self.class_label(request_class)).inc()

    def count_slo(self, tenant: str, request_class: str, *, met: bool) -> None:
        self.slo_outcomes.labels(
            self.tenant_label(tenant), self.class_label(request_class), "met" if met else "missed"
        ).inc()

    def track_tenants(self, usage: Callable[[], Iterable[TenantUsage]]) -> None:
        """Per-tenant gauges (``placement_tenant_*``) from ``usage`` at each scrape."""
        self.registry.register(_TenantCollector(usage))

    def track_solver(self, report: Callable[[], tuple[str, float] | None]) -> None:
        """The installed plan's solver status and time from ``report`` at each scrape."""
        self.registry.register(_SolverCollector(report))

    def count_scrape_failure(self, replica_id: str) -> None:
        self.scrape_failures.labels(self.replica_label(replica_id)).inc()

    def track_plan(self, created_at: Callable[[], float | None]) -> None:
        """Compute the plan age when scraped, not when the plan changed."""

        def age() -> float:
            at = created_at()
            return -1.0 if at is None else max(0.0, time.time() - at)

        self.plan_age.set_function(age)
