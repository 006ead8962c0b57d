"""The gateway's own Prometheus metrics, in the service's registry (one ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from serving.gateway.result_cache import ResultCache

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
OVERHEAD_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2)


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry, cache: ResultCache) -> None:
        self.requests = Counter(
            "placement_gateway_requests",
            "Requests through the gateway by outcome (ok, cache_hit, upstream_error, "
            "stream_error, refused, no_replica, bad_request, client_gone)",
            ["outcome"],
            registry=registry,
        )
        self.retries = Counter(
            "placement_gateway_retries",
            "Tries sent to a fallback replica, by what failed before the first byte",
            ["cause"],
            registry=registry,
        )
        self.retries_refused = Counter(
            "placement_gateway_retry_budget_exhausted",
            "Retries not sent because the retry budget was spent",
            registry=registry,
        )
        self.stream_errors = Counter(
            "placement_gateway_stream_errors",
            "Streams that failed after their first byte (ended with an error event)",
            registry=registry,
        )
        self.ttft = Histogram(
            "placement_gateway_ttft_seconds",
            "Time from a request's arrival at the gateway to its first byte from a replica",
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.overhead = Histogram(
            "placement_gateway_overhead_seconds",
            "Gateway work before a request leaves for its replica (auth, parse, route)",
            buckets=OVERHEAD_BUCKETS,
            registry=registry,
        )
        self.slo = Counter(
            "placement_gateway_slo",
            "Requests with an x-slo-ttft-ms / x-slo-tpot-ms header, by whether it was met",
            ["slo", "result"],
            registry=registry,
        )
        self._outcomes: dict[str, Counter] = {}
        Gauge(
            "placement_gateway_result_cache_hit_ratio",
            "Share of deterministic requests answered from the result cache",
            registry=registry,
        ).set_function(lambda: cache.hit_ratio)
        Gauge(
            "placement_gateway_result_cache_bytes",
            "Bytes held by the result cache",
            registry=registry,
        ).set_function(lambda: cache.bytes)
        Gauge(
            "placement_gateway_result_cache_hits",
            "Result-cache hits since start",
            registry=registry,
        ).set_function(lambda: cache.hits)
        Gauge(
            "placement_gateway_result_cache_misses",
            "Result-cache misses since start",
            registry=registry,
        ).set_function(lambda: cache.misses)

    def outcome(self, label: str) -> Counter:
        """The request counter's child for an outcome (looked up once per label, not per
        request)."""
        child = self._outcomes.get(label)
        if child is None:
            child = self._outcomes[label] = self.requests.labels(label)
        return child
