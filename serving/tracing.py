"""OpenTelemetry traces of the route path: one span per decision, exported by OTLP.

A span ``placement.route`` per ``POST /v1/route`` decision (a refusal included) carries the
tenant, model, request class, decision id, replica, reason (``plan`` or ``fallback:<why>``),
plan version and predicted TTFT, or the refusal's reason. Spans are batched and sent by
OTLP/HTTP (protobuf) from the SDK's background thread, never on the request.

Configured by ``PLACEMENT_OTLP_ENDPOINT`` (the collector's base URL, e.g.
``http://127.0.0.1:4318``; traces go to ``/v1/traces``) or OpenTelemetry's own
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``. With none set there is
no tracer at all: the route path tests one attribute for ``None`` and the SDK is not imported.
"""

from __future__ import annotations

import os
import time
from typing import Any

from serving.route.types import Decision, RouteQuery

SPAN = "placement.route"
TRACER_NAME = "placement.serving"
OTEL_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXPORT_DELAY_MS = 1_000  # how long a finished span may wait for its batch


class DecisionTracer:
    """Spans for decisions, sent to ``endpoint`` (a base URL; None: OpenTelemetry's own
    ``OTEL_EXPORTER_OTLP_*`` variables say where)."""

    def __init__(self, endpoint: str | None, *, service_name: str = "placement") -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = (
            OTLPSpanExporter()
            if endpoint is None
            else OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        )
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=EXPORT_DELAY_MS)
        )
        self._tracer = self.provider.get_tracer(TRACER_NAME)

    def _span(self, started_ns: int, attributes: dict[str, Any]) -> None:
        span = self._tracer.start_span(SPAN, start_time=started_ns, attributes=attributes)
        span.end()

    def decision(
        self, query: RouteQuery, decision: Decision, decision_id: str, started_ns: int
    ) -> None:
        attributes: dict[str, Any] = {
            "placement.tenant": query.tenant,
            "placement.model": query.model,
            "placement.request_class": query.request_class,
            "placement.decision_id": decision_id,
            "placement.replica_id": decision.replica_id,
            "placement.reason": decision.reason,
            "placement.predicted_ttft_s": decision.predicted_ttft_s,
        }
        if decision.plan_version is not None:
            attributes["placement.plan_version"] = decision.plan_version
        self._span(started_ns, attributes)

    def refusal(self, query: RouteQuery, reason: str, started_ns: int) -> None:
        self._span(
            started_ns,
            {
                "placement.tenant": query.tenant,
                "placement.model": query.model,
                "placement.request_class": query.request_class,
                "placement.refused": reason,
            },
        )

    def close(self) -> None:
        """Send what is batched and stop the exporter's thread."""
        self.provider.shutdown()


def decision_tracer(endpoint: str | None) -> DecisionTracer | None:
    """The tracer for ``endpoint`` (PLACEMENT_OTLP_ENDPOINT) or OpenTelemetry's variables;
    None when neither is set."""
    if endpoint:
        return DecisionTracer(endpoint)
    if any(os.environ.get(v) for v in OTEL_ENDPOINT_VARS):
        return DecisionTracer(None)
    return None


def now_ns() -> int:
    return time.time_ns()
