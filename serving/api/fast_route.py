"""``POST /v1/route`` answered without the framework.

The hot endpoint spends most of its time in the framework, not in the decision: request
object, dependency resolution, exception middleware, an ASGI task per request. :func:`answer`
gives the whole answer (status, JSON bytes, headers) from the request's headers and body —
same authentication (:class:`~serving.api.security.KeyRing`), same body model and validation,
same answers (every error a ``Problem``, with the statuses the OpenAPI document declares) and
headers as the FastAPI route with the middlewares ahead of it (:mod:`serving.api.limits`,
:mod:`serving.api.media_type`) in :mod:`serving.api.routers.route`, which stays the documented
(OpenAPI) definition. Two callers: :class:`FastRoute`, an ASGI middleware ahead of FastAPI's
routing (any ASGI server), and :mod:`serving.api.route_protocol`, which answers it inside the
HTTP protocol itself under uvicorn. Everything else passes through untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal

import orjson
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from placement.errors import InputError, PlacementError
from serving.api.errors import body_errors, problem_body
from serving.api.media_type import UNSUPPORTED, is_json
from serving.api.route_answer import answer_bytes
from serving.api.route_body import plain_query
from serving.api.routers.route import class_errors, to_query
from serving.api.runtime import ServiceRuntime
from serving.api.schemas import RouteRequest
from serving.api.security import refusal_of, token_from_headers
from serving.route.types import NoReplica, RouteQuery, UnservedModel
from serving.service import ModelNotAllowed, PlacementService, Refused, Routed

log = logging.getLogger(__name__)

ROUTE_PATH = "/v1/route"
JSON_TYPE = (b"content-type", b"application/json")

Headers = list[tuple[bytes, bytes]]


class _Refusal(Exception):
    def __init__(
        self,
        status: int,
        detail: Any,
        headers: dict[str, str] | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        self.status = status
        self.body = problem_body(detail, retry_after_s)
        self.headers = headers or {}


# what a request's headers tell the answer: the API key they carry (None: none sent), the
# largest body length they declare (-1: none), and whether the body is declared JSON
RouteHead = tuple[str | None, int, bool]


def read_head(headers: Iterable[tuple[bytes, bytes]]) -> RouteHead:
    """The :data:`RouteHead` of these request headers (lower-case names). A function of the
    header bytes alone: a caller that sees the same header lines again may keep it."""
    authorization = x_api_key = None
    declared = -1
    json_body = True
    for name, value in headers:
        if name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == b"x-api-key":
            x_api_key = value.decode("latin-1")
        elif name == b"content-length" and value.isdigit():
            length = int(value)
            declared = length if length > declared else declared
        elif name == b"content-type":
            json_body = is_json(value)
    return token_from_headers(authorization, x_api_key), declared, json_body


def answer_lines(
    runtime: ServiceRuntime, headers: Iterable[tuple[bytes, bytes]], body: bytes | None
) -> tuple[int, bytes, bytes]:
    """Status, header lines (content type and length first, each ending in CRLF) and JSON
    body of ``POST /v1/route`` with these request headers (lower-case names) and body (None:
    over the size limit). A bug is logged and answered as a Problem 500, as
    :class:`~serving.api.errors.CrashAsProblem` does for the other endpoints."""
    return answer_read(runtime, read_head(headers), body)


def answer_read(
    runtime: ServiceRuntime, head: RouteHead, body: bytes | None
) -> tuple[int, bytes, bytes]:
    """:func:`answer_lines` of a request whose headers were read already (:func:`read_head`)."""
    try:
        head_lines, payload = answer_bytes(_route(runtime, head, body))
        return 200, head_lines, payload
    except _Refusal as refusal:
        status, data = refusal.status, refusal.body
        extra = [(k.encode(), v.encode()) for k, v in refusal.headers.items()]
    except Exception:
        log.exception("unexpected error answering POST %s", ROUTE_PATH)
        status, data, extra = 500, problem_body("internal error"), []
    payload = orjson.dumps(data)
    lines = [JSON_TYPE, (b"content-length", b"%d" % len(payload)), *extra]
    return status, b"".join(name + b": " + value + b"\r\n" for name, value in lines), payload


def answer(
    runtime: ServiceRuntime, headers: Iterable[tuple[bytes, bytes]], body: bytes | None
) -> tuple[int, bytes, Headers]:
    """:func:`answer_lines` with the headers as (name, value) pairs."""
    status, head, payload = answer_lines(runtime, headers, body)
    pairs: Headers = []
    for line in head.split(b"\r\n")[:-1]:
        name, _, value = line.partition(b": ")
        pairs.append((name, value))
    return status, payload, pairs


def _route(runtime: ServiceRuntime, head: RouteHead, raw: bytes | None) -> Routed:
    token, declared, json_body = head
    max_bytes = runtime.settings.max_body_bytes
    if declared > max_bytes:
        raise _Refusal(413, f"request body over {max_bytes} bytes")
    if not json_body:
        raise _Refusal(415, UNSUPPORTED)
    principal = runtime.keys.authenticate(token)
    if principal is None:
        raise _Refusal(401, refusal_of(token), {"WWW-Authenticate": "Bearer"})
    if "route" not in principal.scopes:
        raise _Refusal(403, "this key lacks the scope: route")
    if raw is None:
        raise _Refusal(413, f"request body over {max_bytes} bytes")
    service = runtime.service
    body = _body(service, raw)
    if not principal.may_act_for(body.tenant):
        raise _Refusal(403, f"this key routes only for tenant '{principal.tenant}'")
    try:
        if isinstance(body, RouteQuery):
            query = body
        else:
            query = to_query(body, runtime.settings.text_block_chars)
        routed = service.route(query, routed_by=principal.name)
    except Refused as exc:
        raise _Refusal(
            429, str(exc), {"Retry-After": str(exc.retry_after_s)}, exc.retry_after_s
        ) from None
    except UnservedModel as exc:
        raise _Refusal(404, str(exc)) from None
    except NoReplica as exc:
        raise _Refusal(503, str(exc) or "no replica can serve") from None
    except InputError as exc:
        raise _Refusal(422, str(exc)) from None
    except ModelNotAllowed as exc:
        raise _Refusal(403, str(exc)) from None
    except PlacementError as exc:
        raise _Refusal(400, str(exc)) from None
    return routed


def _body(service: PlacementService, raw: bytes) -> RouteQuery | RouteRequest:
    """The query of a plain body (:func:`~serving.api.route_body.plain_query`), else the body
    validated by its model: a Problem 422 with every field error."""
    query = plain_query(raw)
    if query is not None and query.request_class in service.admission.classes:
        return query
    try:
        request = RouteRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise _Refusal(422, body_errors(exc)) from None
    unknown = class_errors(service.admission.classes, [(("body",), request)])
    if unknown:
        raise _Refusal(422, unknown)
    return request


class FastRoute:
    """ASGI middleware answering ``POST /v1/route`` with :func:`answer` (see the module doc)."""

    def __init__(self, app: ASGIApp, *, runtime: ServiceRuntime) -> None:
        self.app = app
        self.runtime = runtime
        self.max_bytes = runtime.settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != ROUTE_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await self._body(receive)
        if isinstance(body, bool):
            status, payload, raw = 400, orjson.dumps(problem_body("client disconnected")), []
            raw = [JSON_TYPE, (b"content-length", str(len(payload)).encode())]
        else:
            status, payload, raw = answer(self.runtime, scope["headers"], body)
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})

    async def _body(self, receive: Receive) -> bytes | Literal[False] | None:
        """The body; None when over the size limit (read no further); False on a disconnect."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return False
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
