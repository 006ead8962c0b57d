"""Assemble the FastAPI app: routers, middleware, error handlers, background loops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from serving.api.errors import CrashAsProblem, install_error_handlers
from serving.api.fast_route import FastRoute
from serving.api.limits import BodyLimit
from serving.api.media_type import JsonBodies
from serving.api.openapi import openapi_document
from serving.api.routers import (
    admin,
    health,
    metrics,
    outcomes,
    plans,
    replicas,
    route,
    usage,
    whatif,
)
from serving.api.runtime import ServiceRuntime

CREDITS_SAVE_S = 5.0


async def _save_credits(runtime: ServiceRuntime) -> None:
    # a restart resumes fairness where it stood, give or take this period
    assert runtime.planner is not None
    store = runtime.planner.store
    while True:
        await asyncio.sleep(CREDITS_SAVE_S)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(store.save_credits, runtime.service.credit_counters())


def create_app(runtime: ServiceRuntime) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        tasks: list[asyncio.Task[None]] = []
        if runtime.background:
            if runtime.scraper is not None:
                tasks.append(asyncio.create_task(runtime.scraper.run()))
            if runtime.planner is not None:
                planner = runtime.planner
                runtime.service.on_fleet_change.append(planner.trigger)
                tasks.append(asyncio.create_task(planner.run(solve=runtime.settings.planner)))
                if runtime.shared is None:  # shared counters are kept by the exchange
                    tasks.append(asyncio.create_task(_save_credits(runtime)))
            if runtime.shared is not None:
                tasks.append(asyncio.create_task(runtime.shared.run()))
            if runtime.telemetry is not None:
                tasks.append(asyncio.create_task(runtime.telemetry.run()))
            if runtime.champion is not None:
                tasks.append(asyncio.create_task(runtime.champion.run()))
            if runtime.retraining is not None:
                tasks.append(asyncio.create_task(runtime.retraining.run()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if runtime.telemetry is not None:
                await runtime.telemetry.flush()
            if runtime.shared is not None:
                await runtime.shared.tick()  # the last counts, then withdraw
                await asyncio.to_thread(runtime.shared.leave)
            elif runtime.planner is not None:
                with contextlib.suppress(Exception):
                    runtime.planner.store.save_credits(runtime.service.credit_counters())
            if runtime.planner is not None:
                runtime.planner.close()
            if runtime.retraining is not None:
                runtime.retraining.close()

    app = FastAPI(
        title="Placement service",
        summary="Which replica of an LLM inference fleet should serve this request?",
        version="1",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    for module in (route, outcomes, plans, replicas, admin, usage, whatif, health, metrics):
        app.include_router(module.router)
    app.openapi = openapi_document(app, runtime.service)  # type: ignore[method-assign]
    install_error_handlers(app)
    # ahead of the routes, outermost last: the size limit (413), then the media type (415)
    app.add_middleware(JsonBodies)
    app.add_middleware(BodyLimit, max_bytes=runtime.settings.max_body_bytes)
    # the hot endpoint skips the framework (same answers; see fast_route)
    app.add_middleware(FastRoute, runtime=runtime)
    app.add_middleware(CrashAsProblem)  # outermost: even a bug is answered as a Problem
    return app
