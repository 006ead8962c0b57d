"""``POST /v1/route`` and ``POST /v1/route:batch``: where should this request go?

The single route is the hot endpoint: its body is parsed by pydantic-core straight from the
bytes (no intermediate dict) and its answer is written as bytes, skipping FastAPI's response
serialisation. The decision is also given as headers a proxy can use unchanged:
``x-gateway-destination-endpoint`` lists the chosen replica's address, then the fallbacks'.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import ValidationError

from placement.domain.llm import text_token_estimate
from placement.domain.prefix import hash_text
from placement.errors import InputError
from serving.api.deps import RouteCaller, RuntimeDep
from serving.api.errors import body_errors
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.schemas import (
    BatchItem,
    BatchRouteRequest,
    BatchRouteResponse,
    RouteRequest,
    RouteResponse,
)
from serving.api.security import Principal
from serving.route.types import NoReplica, RouteQuery, UnservedModel
from serving.service import ModelNotAllowed, PlacementService, Refused, Routed

router = APIRouter(prefix="/v1", tags=["route"])

DESTINATION = "x-gateway-destination-endpoint"
_DESTINATION_RAW = DESTINATION.encode()
BATCH_REFUSALS = problems(
    *AUTH,
    *JSON_BODY,
    described={
        403: "the key lacks the scope, routes for another tenant, or the tenant may not use "
        "the model"
    },
)
REFUSALS = {
    **BATCH_REFUSALS,
    **problems(
        429,
        described={
            404: "no registered replica serves the model",
            503: "no healthy replica serves the model",
        },
    ),
}


def to_query(body: RouteRequest, block_chars: int) -> RouteQuery:
    if body.prompt is not None:
        hashes = hash_text(body.prompt, block_chars)
        tokens = body.input_tokens
        if tokens is None:
            tokens = text_token_estimate(len(body.prompt), body.model, body.max_output_tokens)
    else:
        hashes = tuple(body.block_hashes or ())
        tokens = body.input_tokens or 0
    return RouteQuery(
        tenant=body.tenant,
        model=body.model,
        request_class=body.request_class,
        block_hashes=hashes,
        input_tokens=tokens,
        max_output_tokens=body.max_output_tokens,
    )


def class_errors(
    classes: Collection[str], requests: Iterable[tuple[Sequence[str | int], RouteRequest]]
) -> list[dict[str, Any]]:
    """Field errors for requests (each with its location) naming a class this service does not
    serve: refused with the body's other errors (422), as the document's enum states."""
    return [
        {
            "loc": [*loc, "request_class"],
            "msg": f"unknown request class '{body.request_class}' "
            f"(expected one of {', '.join(sorted(classes))})",
            "type": "enum",
        }
        for loc, body in requests
        if body.request_class not in classes
    ]


def _check_tenant(principal: Principal, tenant: str) -> None:
    if not principal.may_act_for(tenant):
        raise HTTPException(403, f"this key routes only for tenant '{principal.tenant}'")


def _answer(service: PlacementService, routed: Routed) -> dict[str, Any]:
    d = routed.decision
    fallbacks = [
        {"replica_id": r, "address": a}
        for r, a in zip(routed.replica_ids[1:], routed.addresses[1:], strict=True)
    ]
    answer: dict[str, Any] = {
        "decision_id": routed.decision_id,
        "replica_id": d.replica_id,
        "address": d.address,
        "reason": d.reason,
        "plan_version": d.plan_version,
        "predicted_ttft_s": d.predicted_ttft_s,
        "fallbacks": fallbacks,
    }
    if routed.priority is not None:  # replicas scheduling by priority: send it in the body
        answer["priority"] = routed.priority
    return answer


def raw_headers(routed: Routed) -> list[tuple[bytes, bytes]]:
    """The decision as response headers (lower-case names, UTF-8 values), as the protocol
    writes them: the chosen replica's address and the fallbacks', the replica, the reason, the
    plan version, the decision id and, when the replicas schedule by priority, the engine
    priority to send the request with."""
    d = routed.decision
    version = d.plan_version
    headers = [
        (_DESTINATION_RAW, ",".join(routed.addresses).encode()),
        (b"x-placement-replica", d.replica_id.encode()),
        (b"x-placement-reason", d.reason.encode()),
        (b"x-placement-plan-version", b"" if version is None else b"%d" % version),
        (b"x-placement-decision-id", routed.decision_id.encode()),
    ]
    if routed.priority is not None:
        headers.append((b"x-placement-priority", b"%d" % routed.priority))
    return headers


def _headers(routed: Routed) -> dict[str, str]:
    return {name.decode(): value.decode() for name, value in raw_headers(routed)}


@router.post(
    "/route",
    response_model=RouteResponse,
    responses=REFUSALS,
    # the body is read by pydantic-core from the bytes: state it as the schema the batch shares
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/RouteRequest"}}
            },
        }
    },
    summary="Place one request",
)
async def route(request: Request, runtime: RuntimeDep, principal: RouteCaller) -> Response:
    try:
        body = RouteRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise HTTPException(422, body_errors(exc)) from None
    service = runtime.service
    unknown = class_errors(service.admission.classes, [(("body",), body)])
    if unknown:
        raise HTTPException(422, unknown)
    _check_tenant(principal, body.tenant)
    routed = service.route(
        to_query(body, runtime.settings.text_block_chars), routed_by=principal.name
    )
    return Response(
        json.dumps(_answer(service, routed)),
        media_type="application/json",
        headers=_headers(routed),
    )


@router.post(
    "/route:batch",
    response_model=BatchRouteResponse,
    responses=BATCH_REFUSALS,
    summary="Place many requests; each result carries its own status",
)
async def route_batch(
    body: BatchRouteRequest, runtime: RuntimeDep, principal: RouteCaller
) -> BatchRouteResponse:
    service = runtime.service
    located = [(("body", "requests", i), item) for i, item in enumerate(body.requests)]
    errors = class_errors(service.admission.classes, located)
    if errors:
        raise HTTPException(422, errors)
    for item in body.requests:
        _check_tenant(principal, item.tenant)
    results = []
    for item in body.requests:
        try:
            query = to_query(item, runtime.settings.text_block_chars)
            routed = service.route(query, routed_by=principal.name)
        except Refused as exc:
            results.append(BatchItem(status=429, detail=str(exc), retry_after_s=exc.retry_after_s))
            continue
        except UnservedModel as exc:
            results.append(BatchItem(status=404, detail=str(exc)))
            continue
        except NoReplica as exc:
            results.append(BatchItem(status=503, detail=str(exc)))
            continue
        except InputError as exc:
            results.append(BatchItem(status=422, detail=str(exc)))
            continue
        except ModelNotAllowed as exc:
            results.append(BatchItem(status=403, detail=str(exc)))
            continue
        results.append(
            BatchItem(status=200, decision=RouteResponse.model_validate(_answer(service, routed)))
        )
    return BatchRouteResponse(results=results)
