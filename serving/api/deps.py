"""Dependencies of the routes, as ``Annotated`` aliases: the runtime and the caller's scopes.

401 when the key is missing or unknown, 403 when it lacks the scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from serving.api.runtime import ServiceRuntime
from serving.api.security import Principal, refusal_of, token_from_headers
from serving.service import PlacementService

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)
_bearer = HTTPBearer(auto_error=False)
UNAUTHORISED = {"WWW-Authenticate": "Bearer"}


def get_runtime(request: Request) -> ServiceRuntime:
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


def get_service(request: Request) -> PlacementService:
    return get_runtime(request).service


RuntimeDep = Annotated[ServiceRuntime, Depends(get_runtime)]
ServiceDep = Annotated[PlacementService, Depends(get_service)]


def _authorise(request: Request, token: str | None, scopes: tuple[str, ...]) -> Principal:
    principal = get_runtime(request).keys.authenticate(token)
    if principal is None:
        raise HTTPException(401, refusal_of(token), headers=UNAUTHORISED)
    if not principal.scopes.intersection(scopes):
        raise HTTPException(403, f"this key lacks the scope: {' or '.join(scopes)}")
    return principal


def requires(*scopes: str) -> Callable[..., Principal]:
    """A dependency admitting callers whose key holds any of ``scopes``."""

    # the two security schemes are declared for the OpenAPI document; the key is read from the
    # raw headers, as the fast route does, so that a malformed header is refused, not skipped
    def check(
        request: Request,
        _declared_key: Annotated[str | None, Security(_api_key_header)],
        _declared_bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    ) -> Principal:
        headers = request.headers
        token = token_from_headers(headers.get("authorization"), headers.get("x-api-key"))
        return _authorise(request, token, scopes)

    return check


def metrics_reader(request: Request) -> Principal | None:
    """Anyone, unless ``PLACEMENT_METRICS_AUTH`` is set: then a fleet-wide key with the
    ``metrics`` or ``admin`` scope (the metrics name tenants). No security scheme is declared
    on the operation: by default it has none, and the document says what the setting adds."""
    if not get_runtime(request).settings.metrics_auth:
        return None
    headers = request.headers
    token = token_from_headers(headers.get("authorization"), headers.get("x-api-key"))
    principal = _authorise(request, token, ("metrics", "admin"))
    if principal.tenant is not None:
        raise HTTPException(403, "a tenant-scoped key cannot read fleet-wide state")
    return principal


def requires_fleet_wide(*scopes: str) -> Callable[..., Principal]:
    """As :func:`requires`, refusing tenant-scoped keys (the answer spans every tenant)."""
    inner = requires(*scopes)

    # a default, not an Annotated hint: the hint would name a local FastAPI cannot resolve
    def check(principal: Principal = Depends(inner)) -> Principal:  # noqa: B008
        if principal.tenant is not None:
            raise HTTPException(403, "a tenant-scoped key cannot read fleet-wide state")
        return principal

    return check


RouteCaller = Annotated[Principal, Depends(requires("route"))]
TelemetryCaller = Annotated[Principal, Depends(requires("telemetry", "route"))]
PlanReader = Annotated[Principal, Depends(requires_fleet_wide("route", "admin"))]
FleetReader = Annotated[Principal, Depends(requires_fleet_wide("telemetry", "admin"))]
Admin = Annotated[Principal, Depends(requires_fleet_wide("admin"))]
MetricsReader = Annotated[Principal | None, Depends(metrics_reader)]
