"""Domain errors → HTTP answers: every refusal is a 4xx (or 503) with its reason, never a 500."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from placement.errors import InputError, PlacementError
from serving.plan_store.base import PlanStoreError
from serving.route.types import NoReplica
from serving.service import Refused, UnknownDecision

log = logging.getLogger(__name__)


async def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return JSONResponse(
        {"detail": str(exc), "retry_after_s": exc.retry_after_s},
        status_code=429,
        headers={"Retry-After": str(exc.retry_after_s)},
    )


async def _no_replica(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc) or "no replica can serve"}, status_code=503)


async def _unknown(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def _input(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


async def _store(_: Request, exc: Exception) -> JSONResponse:
    log.error("plan store: %s", exc)
    return JSONResponse({"detail": str(exc)}, status_code=503)


async def _placement(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=400)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Refused, _refused)
    app.add_exception_handler(NoReplica, _no_replica)
    app.add_exception_handler(UnknownDecision, _unknown)
    app.add_exception_handler(InputError, _input)
    app.add_exception_handler(PlanStoreError, _store)
    app.add_exception_handler(PlacementError, _placement)
