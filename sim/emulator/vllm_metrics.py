"""One replica's ``/metrics`` under vLLM's own names, written by ``prometheus_client``.

Gauges and token counters are read from the engine when scraped (``vllm:num_requests_running``,
``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``, ``vllm:prefix_cache_queries_total`` and
``vllm:prefix_cache_hits_total`` in tokens, ``vllm:num_preemptions_total``); latency histograms
are observed as requests finish, with vLLM's buckets: ``vllm:time_to_first_token_seconds``,
``vllm:time_per_output_token_seconds`` and its newer name ``vllm:inter_token_latency_seconds``,
``vllm:e2e_request_latency_seconds``. Every series carries vLLM's ``model_name`` and
``engine`` labels. Times are engine seconds (wall seconds ÷ the emulator's time scale).

:meth:`VllmMetrics.etag` names the page's content without rendering it (every value the page
shows is a function of the engine's counters and the requests observed), so ``/metrics`` can
answer a conditional GET whose ``If-None-Match`` still holds with an empty 304.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sim.emulator.pooling import PoolingEngine, PoolJob
from sim.emulator.realtime import Job, RealtimeEngine

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TPOT_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
LABELS = ("model_name", "engine")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _EngineState(Collector):
    """Gauges and counters read from the engine at scrape time."""

    def __init__(self, engine: RealtimeEngine | PoolingEngine, labels: tuple[str, str]) -> None:
        self.engine = engine
        self.labels = list(labels)

    def collect(self) -> Iterator[Metric]:
        e = self.engine
        r = e.replica
        for name, doc, value in (
            ("vllm:num_requests_running", "Requests in model execution batches.", r.num_running),
            ("vllm:num_requests_waiting", "Requests waiting to be processed.", r.num_waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", r.kv_usage),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=LABELS)
            gauge.add_metric(self.labels, float(value))
            yield gauge
        for name, doc, total in (
            ("vllm:prompt_tokens", "Prefill tokens processed.", r.prompt_tokens),
            ("vllm:generation_tokens", "Generation tokens processed.", r.generated_tokens),
            ("vllm:prefix_cache_queries", "Prefix-cache queries, in tokens.", r.prompt_tokens),
            ("vllm:prefix_cache_hits", "Prefix-cache hits, in tokens.", r.cached_tokens),
            ("vllm:num_preemptions", "Cumulative preemptions.", r.preemptions),
        ):
            counter = CounterMetricFamily(name, doc, labels=LABELS)
            counter.add_metric(self.labels, float(total))
            yield counter
        # the emulator's own health: how late its engine timers fire (not a vLLM metric)
        lag = CounterMetricFamily(
            "emulator:timer_lag_seconds", "Wall seconds engine run ends fired late.", labels=LABELS
        )
        lag.add_metric(self.labels, e.lag_total_s)
        yield lag
        runs = CounterMetricFamily("emulator:timer_runs", "Engine run ends fired.", labels=LABELS)
        runs.add_metric(self.labels, float(e.lag_count))
        yield runs
        worst = GaugeMetricFamily(
            "emulator:timer_lag_max_seconds", "Latest-firing run end so far.", labels=LABELS
        )
        worst.add_metric(self.labels, e.lag_max_s)
        yield worst


class VllmMetrics:
    """The registry behind one replica's ``/metrics``."""

    def __init__(self, engine: RealtimeEngine | PoolingEngine, model_name: str) -> None:
        self.engine = engine
        self.observed = 0  # requests that left the engine (every histogram change is one)
        self.registry = CollectorRegistry()
        labels = (model_name, "0")
        self.registry.register(_EngineState(engine, labels))

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=self.registry)

        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS
        ).labels(*labels)
        self.tpot = histogram(
            "vllm:time_per_output_token_seconds", "Time per output token.", TPOT_BUCKETS
        ).labels(*labels)
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Inter-token latency.", TPOT_BUCKETS
        ).labels(*labels)
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "End-to-end request latency.", E2E_BUCKETS
        ).labels(*labels)
        success = Counter(
            "vllm:request_success",
            "Requests finished, by reason.",
            [*LABELS, "finished_reason"],
            registry=self.registry,
        )
        self.finished = success.labels(*labels, "length")
        self.failed = Counter(
            "vllm:request_failure", "Requests failed (emulator faults).", LABELS,
            registry=self.registry,
        ).labels(*labels)  # fmt: skip

    def observe(self, job: Job) -> None:
        """A request left the engine."""
        self.observed += 1
        if job.error:
            self.failed.inc()
            return
        self.finished.inc()
        self.ttft.observe(job.first_token_s - job.arrival_s)
        self.e2e.observe(job.finish_s - job.arrival_s)
        tokens = job.req.output_tokens
        if tokens > 1:
            per_token = (job.finish_s - job.first_token_s) / (tokens - 1)
            self.tpot.observe(per_token)
            self.itl.observe(per_token)

    def observe_pooled(self, job: PoolJob) -> None:
        """An embedding request left the engine (its first token is its whole answer)."""
        self.observed += 1
        if job.error:
            self.failed.inc()
            return
        self.finished.inc()
        self.ttft.observe(job.finish_s - job.arrival_s)
        self.e2e.observe(job.finish_s - job.arrival_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def etag(self) -> str:
        """An entity tag that changes whenever :meth:`render` would answer other text."""
        e = self.engine
        r = e.replica
        state = (
            r.num_running, r.num_waiting, r.kv_usage, r.prompt_tokens, r.generated_tokens,
            r.cached_tokens, r.preemptions, self.observed, e.lag_count, e.lag_total_s, e.lag_max_s,
        )  # fmt: skip
        return '"' + hashlib.blake2b(repr(state).encode(), digest_size=12).hexdigest() + '"'
