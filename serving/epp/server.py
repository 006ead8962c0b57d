"""Run the endpoint picker: ext_proc on one gRPC port, health on another, Prometheus metrics.

:class:`EppServer` serves a picker (tests give it port 0 for a free port and read the bound
one back). :func:`serve_epp` is ``placement serve --epp``: the whole service built from its
settings as ``placement serve`` builds it (replicas from the fleet, the plan store, the planner,
the scraper of the replicas' ``/metrics``), behind the picker instead of the HTTP API, until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socketserver
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc
from grpc_health.v1 import health_pb2_grpc
from prometheus_client import CollectorRegistry, make_wsgi_app

from serving.epp.health import PickerHealth
from serving.epp.picker import DEFAULT_BLOCK_TOKENS, EndpointPicker, PickerConfig
from serving.epp.processor import ExternalProcessor

log = logging.getLogger(__name__)

DEFAULT_PORT = 9002
DEFAULT_HEALTH_PORT = 9003
DEFAULT_METRICS_PORT = 9090
STOP_GRACE_S = 2.0
# one port, one server: without this, gRPC on Linux binds a port another process already holds
_OPTIONS = [("grpc.so_reuseport", 0)]


class EppServer:
    def __init__(
        self,
        picker: EndpointPicker,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        health_port: int = DEFAULT_HEALTH_PORT,
        metrics_port: int | None = DEFAULT_METRICS_PORT,
        health_interval_s: float = 1.0,
    ) -> None:
        self.picker = picker
        self.health = PickerHealth(picker.service)
        self.host = host
        self.port = port
        self.health_port = health_port
        self.metrics_port = metrics_port
        self._interval = health_interval_s
        self._servers: list[grpc.aio.Server] = []
        self._metrics: tuple[WSGIServer, threading.Thread] | None = None
        self._health_task: asyncio.Task[None] | None = None

    async def start(self) -> EppServer:
        processor = grpc.aio.server(options=_OPTIONS)
        external_processor_pb2_grpc.add_ExternalProcessorServicer_to_server(
            ExternalProcessor(self.picker), processor
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health.servicer, processor)
        self.port = _bind(processor, self.host, self.port, "ext_proc")
        health = grpc.aio.server(options=_OPTIONS)
        health_pb2_grpc.add_HealthServicer_to_server(self.health.servicer, health)
        self.health_port = _bind(health, self.host, self.health_port, "health")
        await self.health.refresh()
        for server in (processor, health):
            await server.start()
            self._servers.append(server)
        if self.metrics_port is not None:
            registry = self.picker.service.metrics.registry
            self._metrics = _serve_metrics(self.host, self.metrics_port, registry)
            self.metrics_port = int(self._metrics[0].server_port)
        self._health_task = asyncio.create_task(self.health.run(self._interval))
        self.picker.start()
        return self

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        await self.picker.close()
        await self.health.shutdown()
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health_task
        await asyncio.gather(*(s.stop(grace_s) for s in self._servers))
        self._servers.clear()
        if self._metrics is not None:
            httpd, thread = self._metrics
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)
            self._metrics = None


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def _serve_metrics(
    host: str, port: int, registry: CollectorRegistry
) -> tuple[WSGIServer, threading.Thread]:
    """Prometheus text on ``http://host:port/metrics`` from a thread (stops within 0.1 s)."""
    httpd = make_server(
        host, port, make_wsgi_app(registry), _ThreadingWSGIServer, handler_class=_QuietHandler
    )
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    return httpd, thread


def _bind(server: grpc.aio.Server, host: str, port: int, what: str) -> int:
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port} for {what} (in use?)")
    return bound


def serve_epp(
    settings: object,
    *,
    port: int = DEFAULT_PORT,
    health_port: int = DEFAULT_HEALTH_PORT,
    metrics_port: int | None = DEFAULT_METRICS_PORT,
    max_fallbacks: int | None = None,
    addresses: dict[str, str] | None = None,
) -> None:
    """``placement serve --epp``: serve until SIGINT or SIGTERM."""
    asyncio.run(
        _serve(
            settings,
            port=port,
            health_port=health_port,
            metrics_port=metrics_port,
            max_fallbacks=max_fallbacks,
            addresses=addresses,
        )
    )


async def _serve(
    settings: object,
    *,
    port: int,
    health_port: int,
    metrics_port: int | None,
    max_fallbacks: int | None,
    addresses: dict[str, str] | None,
) -> None:
    from serving.api.runtime import ServiceRuntime
    from serving.api.settings import Settings
    from serving.flow import FlowPolicy
    from serving.gateway.settings import load_gateway_settings
    from serving.wiring import build_app

    assert isinstance(settings, Settings)
    app = build_app(settings, addresses=addresses)
    runtime = app.state.runtime
    assert isinstance(runtime, ServiceRuntime)
    service = runtime.service
    profile = getattr(service.route_path, "profile", None)
    # flow control as the gateway's (PLACEMENT_GATEWAY_QUEUE_*; queue_max 0: refused at once)
    queue = load_gateway_settings()
    config = PickerConfig(
        text_block_chars=settings.text_block_chars,
        block_tokens=getattr(profile, "block_tokens", DEFAULT_BLOCK_TOKENS),
        max_body_bytes=settings.max_body_bytes,
        max_fallbacks=max_fallbacks,
        flow=FlowPolicy(
            order=queue.queue_order,
            max_queued=queue.queue_max,
            deadline_slack=queue.queue_deadline_slack,
            tenant_floor=queue.queue_tenant_floor,
            band_headroom=queue.queue_band_headroom,
            backfill=queue.queue_backfill,
        ),
        queue_prefill_tokens_per_s=queue.queue_prefill_tokens_per_s,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # the service's background work (scraper, planner, credit saves) as the HTTP API runs it
    async with app.router.lifespan_context(app):
        server = EppServer(
            EndpointPicker(service, config, telemetry=runtime.telemetry),
            host=settings.host,
            port=port,
            health_port=health_port,
            metrics_port=metrics_port,
        )
        await server.start()
        log.warning(
            "endpoint picker: ext_proc %s:%d, health %d, metrics %s",
            settings.host,
            server.port,
            server.health_port,
            server.metrics_port,
        )
        try:
            await stop.wait()
        finally:
            await server.stop()
