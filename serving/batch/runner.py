"""Runs the requests of open batch jobs on capacity interactive traffic leaves idle.

A loop in the gateway's event loop: while a job is ``in_progress`` and the idle rule
(:class:`serving.flow.IdlePolicy`) allows, it starts the job's next request at the lowest
priority (request class ``batch``, which admission sheds first); the oldest job goes first.
When interactive load rises — anything waiting in the flow-control queue, the fleet past the
busy mark, or admission refusing — it *pauses*: it starts nothing new, lets what runs finish,
fails nothing, and looks again a moment later. Every answer is stored as it arrives; a job
with every request answered is finalized, one past its window is expired, one being
cancelled is closed once its running requests end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from serving.batch.jobs import BatchJobs
from serving.batch.store import BatchRequest
from serving.flow import IdlePolicy

log = logging.getLogger(__name__)

# (tenant, path, body) → (HTTP status, body), or None: the fleet has no room for it now
Execute = Callable[[str, str, bytes], Awaitable[tuple[int, bytes] | None]]


@dataclass(frozen=True, slots=True)
class Load:
    """What the idle rule looks at, as it stands now."""

    waiting_above: int  # requests waiting in the flow-control queue
    in_flight: int
    budget: int  # the fleet's in-flight budget
    quiet_s: float = float("inf")  # since a request last had to wait or was refused


TICK_S = 0.05
PAUSE_S = 0.25  # after a refusal, look again this much later
FETCH = 64  # requests read from the store at a time


class BatchRunner:
    def __init__(
        self,
        jobs: BatchJobs,
        execute: Execute,
        load: Callable[[], Load],
        registry: CollectorRegistry,
        *,
        idle: IdlePolicy | None = None,
    ) -> None:
        self.jobs = jobs
        self.store = jobs.store
        self.execute = execute
        self.load = load
        self.idle = idle or IdlePolicy()
        self.running: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._queued: dict[str, list[BatchRequest]] = {}
        self._paused_until = 0.0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.paused = False
        self.answered = Counter(
            "placement_batch_requests",
            "Batch requests answered, by result (ok, error)",
            ["result"],
            registry=registry,
        )
        Gauge(
            "placement_batch_running", "Batch requests running now", registry=registry
        ).set_function(lambda: len(self.running))
        Gauge(
            "placement_batch_paused",
            "1 while batch work is paused for interactive load",
            registry=registry,
        ).set_function(lambda: float(self.paused))

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Resume what a previous process left open, then run."""
        for batch in self.store.batches_in(("validating",)):
            self.jobs.validate(batch, self.store.tenant_of(batch["id"]))
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.running.clear()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # ---- the loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            try:
                busy = self.step()
            except Exception:  # a store error must not stop batch work for good
                log.exception("batch runner step failed")
                busy = True
            if not busy:
                wake.clear()
                await wake.wait()
            await asyncio.sleep(TICK_S)

    def step(self) -> bool:
        """Close what is due, start what the idle rule allows; False when nothing is open."""
        open_jobs = self.store.batches_in(("in_progress", "cancelling"))
        if not open_jobs:
            self.paused = False
            return bool(self.running)
        now = time.time()
        startable: list[dict[str, Any]] = []
        for batch in open_jobs:
            if batch["status"] == "cancelling" or now >= batch["expires_at"]:
                if not self._running_of(batch["id"]):
                    end = "cancelled" if batch["status"] == "cancelling" else "expired"
                    self._queued.pop(batch["id"], None)
                    self.jobs.finalize(batch, end=end)
                continue
            startable.append(batch)
        if time.monotonic() < self._paused_until:
            self.paused = True
            return True
        for batch in startable:
            if not self._start_from(batch):
                break
        return True

    def _start_from(self, batch: dict[str, Any]) -> bool:
        """Start requests of ``batch`` while allowed; False when the rule says stop."""
        batch_id = batch["id"]
        queued = self._queued.get(batch_id)
        if not queued:
            queued = [
                r
                for r in self.store.pending(batch_id, FETCH + len(self._running_of(batch_id)))
                if (batch_id, r.line) not in self.running
            ]
            self._queued[batch_id] = queued
            if not queued:
                if not self._running_of(batch_id):
                    self._queued.pop(batch_id, None)
                    self.jobs.finalize(batch, end="completed")
                return True
        tenant = self.store.tenant_of(batch_id)
        while queued:
            load = self.load()
            if not self.idle.may_start(
                waiting_above=load.waiting_above,
                in_flight=load.in_flight,
                batch_in_flight=len(self.running),
                budget=load.budget,
                quiet_s=load.quiet_s,
            ):
                self.paused = True
                return False
            self.paused = False
            request = queued.pop(0)
            key = (batch_id, request.line)
            self.running[key] = asyncio.get_running_loop().create_task(self._one(tenant, request))
        return True

    def _running_of(self, batch_id: str) -> list[tuple[str, int]]:
        return [k for k in self.running if k[0] == batch_id]

    async def _one(self, tenant: str, request: BatchRequest) -> None:
        key = (request.batch_id, request.line)
        try:
            answer = await self.execute(tenant, request.url, request.body.encode())
            if answer is None:  # no room: back to the queue, paused a moment
                self._queued.setdefault(request.batch_id, []).insert(0, request)
                self._paused_until = time.monotonic() + PAUSE_S
                self.paused = True
                return
            status, body = answer
            try:
                parsed: Any = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                parsed = {"error": {"message": body.decode(errors="replace")[:2000]}}
            self.store.answer(request.batch_id, request.line, status, parsed)
            self.answered.labels("ok" if 200 <= status < 300 else "error").inc()
        finally:
            self.running.pop(key, None)
            self.wake()
