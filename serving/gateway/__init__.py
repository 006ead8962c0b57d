"""The OpenAI-compatible gateway mode (``placement serve --proxy``): requests go through the
service to the replica its route path picks, with retries, a result cache and outcomes recorded.

Modules: :mod:`.headers` (key, tenant, class, SLOs), :mod:`.prompt` (the body as a route
query), :mod:`.forward` (the pooled client), :mod:`.retry` (the budget), :mod:`.stream` (event
relay), :mod:`.result_cache`, :mod:`.outcome` (accounting and telemetry), :mod:`.proxy` (the
request path), :mod:`.asgi` (the middleware).
"""

from collections.abc import Callable, Sequence

from fastapi import FastAPI

from serving.gateway.asgi import Companion, GatewayMiddleware
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
    app.add_middleware(GatewayMiddleware, gateway=gateway, companions=extra)
    return gateway


__all__ = [
    "Companion",
    "Gateway",
    "GatewayMiddleware",
    "GatewaySettings",
    "install_gateway",
    "load_gateway_settings",
]
