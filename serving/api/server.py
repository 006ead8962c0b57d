"""Serve the app under uvicorn (uvloop, httptools; ``POST /v1/route`` answered in the protocol:
:mod:`serving.api.route_protocol`) and stop cleanly on SIGTERM or SIGINT.

On the first signal the planner's worker processes are stopped at once (from a thread: a
signal handler must not wait on locks the interrupted code may hold), so a solve in progress,
a forced one included, ends now rather than holding the shutdown up; requests still in flight
after :data:`GRACEFUL_SHUTDOWN_S` are cancelled (a route takes microseconds). With the
workers spawned rather than forked (:mod:`serving.workers`), no child holds the port: the
service and its children are gone within seconds and a restart on the same port succeeds at
once.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from serving.api.route_protocol import route_protocol
from serving.api.runtime import ServiceRuntime

GRACEFUL_SHUTDOWN_S = 2


class StoppingServer(uvicorn.Server):
    """uvicorn's server, running ``on_exit`` in a thread as soon as a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._on_exit is not None:
            threading.Thread(target=self._on_exit, name="stop-workers", daemon=True).start()


def serve_app(app: FastAPI, *, host: str, port: int, log_level: str = "warning") -> None:
    """Serve until SIGTERM or SIGINT; the planner's workers are stopped on the way out in any
    case (the lifespan does it, and this covers a forced second Ctrl-C that skips it)."""
    runtime: ServiceRuntime = app.state.runtime
    planner = runtime.planner
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        # the gateway's own protocol when it is installed (it answers /v1/route too)
        http=getattr(app.state, "http_protocol", None) or route_protocol(runtime),
        log_level=log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    # what exists now (the plan, its compiled tables, imports) stays out of every collection:
    # a full collection walks millions of a 100k-group plan's objects, a pause of its own
    gc.collect()
    gc.freeze()
    try:
        StoppingServer(config, on_exit=planner.close if planner is not None else None).run()
    finally:
        if planner is not None:
            planner.close()
