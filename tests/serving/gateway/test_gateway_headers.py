"""Who is asking: key, tenant, request class and SLOs from the headers; clear 4xx otherwise."""

from __future__ import annotations

import pytest

from serving.api.security import KeyRing, hash_key
from serving.api.settings import ApiKey
from serving.gateway.errors import GatewayError
from serving.gateway.headers import request_meta

KEYS = KeyRing(
    [
        ApiKey(name="ops", digest=hash_key("ops-key-000000000000"), scopes=("route",)),
        ApiKey(
            name="acme",
            digest=hash_key("acme-key-00000000000"),
            scopes=("route",),
            tenant="acme",
        ),
        ApiKey(name="reader", digest=hash_key("read-key-00000000000"), scopes=("telemetry",)),
    ]
)


def _meta(headers: dict[str, str]):  # type: ignore[no-untyped-def]
    return request_meta(
        headers,
        KEYS,
        tenant_header="x-gateway-inference-fairness-id",
        default_class="interactive",
    )


@pytest.mark.parametrize(
    ("headers", "tenant", "request_class", "ttft", "tpot"),
    [
        ({"authorization": "Bearer ops-key-000000000000"}, "ops", "interactive", None, None),
        ({"x-api-key": "acme-key-00000000000"}, "acme", "interactive", None, None),
        (
            {
                "authorization": "Bearer ops-key-000000000000",
                "x-gateway-inference-fairness-id": "globex",
                "x-gateway-inference-objective": "batch",
                "x-slo-ttft-ms": "1500",
                "x-slo-tpot-ms": "50",
            },
            "globex",
            "batch",
            1.5,
            0.05,
        ),
    ],
)
def test_the_request_is_read_from_its_headers(
    headers: dict[str, str],
    tenant: str,
    request_class: str,
    ttft: float | None,
    tpot: float | None,
) -> None:
    meta = _meta(headers)
    assert (meta.tenant, meta.request_class, meta.ttft_slo_s, meta.tpot_slo_s) == (
        tenant,
        request_class,
        ttft,
        tpot,
    )


@pytest.mark.parametrize(
    ("headers", "status", "what"),
    [
        ({}, 401, "missing API key"),
        ({"authorization": "Bearer nope"}, 401, "invalid API key"),
        ({"x-api-key": "read-key-00000000000"}, 403, "scope: route"),
        (
            {"x-api-key": "acme-key-00000000000", "x-gateway-inference-fairness-id": "globex"},
            403,
            "only for tenant 'acme'",
        ),
        ({"x-api-key": "ops-key-000000000000", "x-slo-ttft-ms": "-3"}, 400, "x-slo-ttft-ms"),
        ({"x-api-key": "ops-key-000000000000", "x-slo-tpot-ms": "nan"}, 400, "x-slo-tpot-ms"),
    ],
)
def test_bad_headers_are_refused_with_a_reason(
    headers: dict[str, str], status: int, what: str
) -> None:
    with pytest.raises(GatewayError) as refused:
        _meta(headers)
    assert refused.value.status == status and what in refused.value.message
