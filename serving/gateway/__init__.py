"""The OpenAI-compatible gateway mode (``placement serve --proxy``): requests go through the
service to the replica its route path picks, with retries, a result cache and outcomes recorded.

Modules: :mod:`.headers` (key, tenant, class, SLOs), :mod:`.prompt` (the body as a route
query), :mod:`.forward` (the pooled client), :mod:`.retry` (the budget), :mod:`.stream` (event
relay), :mod:`.result_cache`, :mod:`.outcome` (accounting and telemetry), :mod:`.proxy` (the
request path), :mod:`.asgi` (the middleware).
"""

from fastapi import FastAPI
from starlette.types import ASGIApp

from serving.gateway.asgi import GatewayMiddleware
from serving.gateway.proxy import Gateway
from serving.gateway.settings import GatewaySettings, load_gateway_settings


def install_gateway(app: FastAPI, settings: GatewaySettings) -> Gateway:
    """Put the gateway in front of an assembled placement app (before it starts serving)."""
    gateway = Gateway(app.state.runtime, settings)
    build_stack = app.build_middleware_stack

    def outermost() -> ASGIApp:
        # ahead of the framework's own layers (error pages, telemetry, body limit): the
        # gateway answers its paths itself, and every layer is a coroutine call per request
        return GatewayMiddleware(build_stack(), gateway=gateway)

    app.build_middleware_stack = outermost  # type: ignore[method-assign]
    return gateway


__all__ = [
    "Gateway",
    "GatewayMiddleware",
    "GatewaySettings",
    "install_gateway",
    "load_gateway_settings",
]
