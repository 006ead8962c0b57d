"""The OpenAI-compatible gateway mode (``placement serve --proxy``): requests go through the
service to the replica its route path picks, with retries, a result cache and outcomes recorded.

Modules: :mod:`.headers` (key, tenant, class, SLOs), :mod:`.prompt` (the body as a route
query), :mod:`.forward` (the pooled client), :mod:`.retry` (the budget), :mod:`.stream` (event
relay), :mod:`.result_cache`, :mod:`.outcome` (accounting and telemetry), :mod:`.proxy` (the
request path), :mod:`.asgi` (the middleware), :mod:`.protocol` (the same paths answered in the
HTTP protocol, ahead of ASGI).
"""

from collections.abc import Callable, Sequence

from fastapi import FastAPI
from starlette.types import ASGIApp

from serving.gateway.asgi import Companion, GatewayMiddleware
from serving.gateway.protocol import GatewayProtocol, gateway_protocol
from serving.gateway.proxy import Gateway
from serving.gateway.settings import GatewaySettings, load_gateway_settings


def install_gateway(
    app: FastAPI,
    settings: GatewaySettings,
    companions: Callable[[Gateway], Sequence[Companion]] | None = None,
) -> Gateway:
    """Put the gateway in front of an assembled placement app (before it starts serving);
    ``companions`` makes the apps served beside it (given the gateway)."""
    gateway = Gateway(app.state.runtime, settings)
    extra = companions(gateway) if companions is not None else ()
    build_stack = app.build_middleware_stack

    def outermost() -> ASGIApp:
        # ahead of the framework's own layers (error pages, telemetry, body limit): the
        # gateway answers its paths itself, and every layer is a coroutine call per request
        return GatewayMiddleware(build_stack(), gateway=gateway, companions=extra)

    app.build_middleware_stack = outermost  # type: ignore[method-assign]
    # served by serve_app, its completions are answered in the HTTP protocol, ahead of ASGI
    app.state.http_protocol = gateway_protocol(app.state.runtime, gateway)
    return gateway


__all__ = [
    "Companion",
    "Gateway",
    "GatewayMiddleware",
    "GatewayProtocol",
    "GatewaySettings",
    "gateway_protocol",
    "install_gateway",
    "load_gateway_settings",
]
