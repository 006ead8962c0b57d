"""``/metrics``: the service's own metrics in Prometheus' text format (behind a key with the
``metrics`` or ``admin`` scope when ``PLACEMENT_METRICS_AUTH`` is set)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from serving.api.deps import MetricsReader, ServiceDep
from serving.api.schemas import Problem

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}},
        401: {"model": Problem, "description": "PLACEMENT_METRICS_AUTH: no or unknown key"},
        403: {"model": Problem, "description": "PLACEMENT_METRICS_AUTH: the key lacks the scope"},
    },
    summary="Prometheus metrics",
)
async def metrics(service: ServiceDep, _: MetricsReader) -> Response:
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)
