"""The endpoint picker's own Prometheus metrics, beside the service's in the same registry
(``/metrics`` on the picker's metrics port serves both)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from serving.metrics import DECISION_BUCKETS

OUTCOMES = ("routed", "bodyless", "bad_request", "not_found", "too_large", "shed", "unavailable")


class PickerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "placement_epp_requests",
            "Requests the endpoint picker answered, by outcome (routed, bodyless: no body to "
            "read; bad_request, not_found, too_large: 4xx; shed: 429; unavailable: 503)",
            ["outcome"],
            registry=registry,
        )
        for outcome in OUTCOMES:
            self.requests.labels(outcome)
        self.pick_latency = Histogram(
            "placement_epp_pick_seconds",
            "From the whole request body to the destination: parse, admission, route path",
            buckets=DECISION_BUCKETS,
            registry=registry,
        )
        self.streams = Gauge(
            "placement_epp_streams", "Open ext_proc streams (requests in flight)", registry=registry
        )
        self.served_elsewhere = Counter(
            "placement_epp_served_elsewhere",
            "Requests the proxy reports served by another endpoint than the primary (a retry "
            "to a fallback); their lease moves to the endpoint that served",
            registry=registry,
        )
        self.incomplete = Counter(
            "placement_epp_incomplete",
            "Streams that ended before the response did (client gone, proxy error)",
            registry=registry,
        )
