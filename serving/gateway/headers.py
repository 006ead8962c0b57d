"""Who is asking and what they were promised, from the request's headers.

- the caller's key: ``Authorization: Bearer <key>`` or ``X-API-Key`` (the service's keys);
- the tenant: a tenant-scoped key's tenant; else the configured tenant header (by default the
  Gateway API Inference Extension's ``x-gateway-inference-fairness-id``); else the key's name;
- the request class: ``x-gateway-inference-objective`` (a class of service such as
  ``interactive`` or ``batch``), else the configured default;
- per-request SLOs: ``x-slo-ttft-ms`` and ``x-slo-tpot-ms`` (positive milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.api.security import KeyRing, token_from_headers
from serving.gateway.errors import GatewayError

OBJECTIVE = "x-gateway-inference-objective"
FAIRNESS_ID = "x-gateway-inference-fairness-id"
SLO_TTFT = "x-slo-ttft-ms"
SLO_TPOT = "x-slo-tpot-ms"
ROUTE_SCOPE = "route"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMeta:
    tenant: str
    request_class: str
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None


def header_map(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers as a dict of lower-case names (the last value of a repeated name wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


def request_meta(
    headers: dict[str, str], keys: KeyRing, *, tenant_header: str, default_class: str
) -> RequestMeta:
    """Authenticate the caller and read the request's tenant, class and SLOs; a
    :class:`GatewayError` (401, 403, 400) otherwise."""
    token = token_from_headers(headers.get("authorization"), headers.get("x-api-key"))
    principal = keys.authenticate(token)
    if principal is None:
        message = "invalid API key" if token else "missing API key: send 'Authorization: Bearer'"
        raise GatewayError(
            401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}
        )
    if ROUTE_SCOPE not in principal.scopes:
        raise GatewayError(403, "this key lacks the scope: route", code="insufficient_scope")
    named = headers.get(tenant_header.lower())
    if principal.tenant is not None:
        if named and named != principal.tenant:
            raise GatewayError(
                403,
                f"this key sends only for tenant '{principal.tenant}'",
                param=tenant_header,
                code="wrong_tenant",
            )
        tenant = principal.tenant
    else:
        tenant = named or principal.name
    return RequestMeta(
        tenant=tenant,
        request_class=headers.get(OBJECTIVE) or default_class,
        ttft_slo_s=_millis(headers, SLO_TTFT),
        tpot_slo_s=_millis(headers, SLO_TPOT),
    )


def _millis(headers: dict[str, str], name: str) -> float | None:
    text = headers.get(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise GatewayError(400, f"{name} must be positive milliseconds, got {text!r}", param=name)
    return value / 1000.0
