"""Every error answer as a :class:`~serving.api.schemas.Problem`, never a 500.

Domain errors map to their status (an unserved model 404, admission 429, nothing healthy 503);
FastAPI's own answers are rewritten into the same schema: request validation (422, the fields
at fault), unknown paths (404), unsupported methods (405, with ``Allow`` naming every method
the path serves, not only those of the first route matched) and a body that cannot be decoded
at all (422 like any malformed JSON, not FastAPI's undocumented 400).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from placement.errors import InputError, PlacementError
from serving.plan_store.base import PlanStoreError
from serving.route.types import NoReplica, UnservedModel
from serving.service import ModelNotAllowed, Refused, UnknownDecision

log = logging.getLogger(__name__)
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def problem_body(detail: Any, retry_after_s: int | None = None) -> dict[str, Any]:
    """A Problem as JSON data (``retry_after_s`` only when set)."""
    body: dict[str, Any] = {"detail": detail}
    if retry_after_s is not None:
        body["retry_after_s"] = retry_after_s
    return body


def problem(
    status: int,
    detail: Any,
    *,
    headers: Mapping[str, str] | None = None,
    retry_after_s: int | None = None,
) -> JSONResponse:
    return JSONResponse(
        problem_body(detail, retry_after_s), status_code=status, headers=dict(headers or {})
    )


def field_errors(errors: Iterable[Mapping[str, Any]], *, prefix: tuple[str, ...] = ()) -> list[Any]:
    """pydantic's errors as Problem field errors: where, what and which kind; never the input
    (it may be a whole prompt) nor pydantic's context (not always JSON)."""
    return [{"loc": [*prefix, *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in errors]


def body_errors(exc: ValidationError) -> list[Any]:
    """A request body's validation errors (read by pydantic from the bytes) as field errors."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    return field_errors(errors, prefix=("body",))


def body_unreadable() -> list[Any]:
    return [{"loc": ["body"], "msg": "body is not UTF-8 JSON", "type": "json_invalid"}]


def allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (for ``Allow``): each method is tried
    against every route, included routers as well, as the router itself would match it."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]
    return ", ".join(allowed)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request)
    # FastAPI answers 400 when the body is not even text (its JSON errors are 422): same as those
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
        return problem(422, body_unreadable())
    return problem(exc.status_code, exc.detail, headers=headers)


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return problem(422, field_errors(exc.errors()))


async def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return problem(
        429,
        str(exc),
        headers={"Retry-After": str(exc.retry_after_s)},
        retry_after_s=exc.retry_after_s,
    )


async def _unserved(_: Request, exc: Exception) -> JSONResponse:
    return problem(404, str(exc))


async def _no_replica(_: Request, exc: Exception) -> JSONResponse:
    return problem(503, str(exc) or "no replica can serve")


async def _unknown(_: Request, exc: Exception) -> JSONResponse:
    return problem(404, str(exc))


async def _not_allowed(_: Request, exc: Exception) -> JSONResponse:
    return problem(403, str(exc))


async def _input(_: Request, exc: Exception) -> JSONResponse:
    return problem(422, str(exc))


async def _store(_: Request, exc: Exception) -> JSONResponse:
    log.error("plan store: %s", exc)
    return problem(503, str(exc))


async def _placement(_: Request, exc: Exception) -> JSONResponse:
    return problem(400, str(exc))


class CrashAsProblem:
    """ASGI middleware: an exception nothing else handled (a bug) is logged with its
    traceback and answered as a Problem 500. Not raised further: the server would then close
    the connection, and the client could lose the answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("unexpected error answering %s %s", scope["method"], scope["path"])
            if started:
                raise
            await problem(500, "internal error")(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(Refused, _refused)
    app.add_exception_handler(UnservedModel, _unserved)
    app.add_exception_handler(NoReplica, _no_replica)
    app.add_exception_handler(UnknownDecision, _unknown)
    app.add_exception_handler(ModelNotAllowed, _not_allowed)
    app.add_exception_handler(InputError, _input)
    app.add_exception_handler(PlanStoreError, _store)
    app.add_exception_handler(PlacementError, _placement)
