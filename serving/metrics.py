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
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "placement_decisions",
            "Route decisions by reason (plan or fallback:<why>)",
            ["reason"],
            registry=self.registry,
        )
        self.decision_latency = Histogram(
            "placement_decision_latency_seconds",
            "Service time of one route decision (admission and route path)",
            buckets=DECISION_BUCKETS,
            registry=self.registry,
        )
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
        # tenants: declared ones only; request classes and replicas: any, up to the cap
        self.tenant_label = BoundedLabel()
        self.class_label = BoundedLabel(known=None)
        self.replica_label = BoundedLabel(known=None)
        self.lease_expiries = Counter(
            "placement_lease_expiries",
            "Leases released unreported, after their request's predicted completion",
            registry=self.registry,
        )
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

    def count_shed(self, tenant: str, request_class: str) -> None:
        self.shed.labels(self.tenant_label(tenant), self.class_label(request_class)).inc()

    def count_scrape_failure(self, replica_id: str) -> None:
        self.scrape_failures.labels(self.replica_label(replica_id)).inc()

    def track_plan(self, created_at: Callable[[], float | None]) -> None:
        """Compute the plan age when scraped, not when the plan changed."""

        def age() -> float:
            at = created_at()
            return -1.0 if at is None else max(0.0, time.time() - at)

        self.plan_age.set_function(age)
