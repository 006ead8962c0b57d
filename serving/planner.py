"""The planner loop: re-solve on a period and on events, off the event loop, and swap in a
plan only when it is good.

A solve runs in a worker process (``concurrent.futures.ProcessPoolExecutor``): CP-SAT holds the
GIL for seconds and the route path must keep answering meanwhile. The result is validated and
compared with the current plan; a failed, timed-out, invalid or worse plan never replaces a
good one. A good plan is persisted to the plan store first and installed second, so every
process following the store sees the same versions.

*Worse* means a lower objective for the same inputs (the same ``inputs_digest``); when the
inputs changed (a replica was lost, demand shifted) objectives are not comparable and a valid
plan for the new inputs wins.

Several service processes share plans through the store: each one follows it (polls the
latest version) and installs what another published.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from placement.errors import PlacementError
from placement.plan import Plan
from serving.plan_store.base import PlanStore

log = logging.getLogger(__name__)

OBJECTIVE_TOLERANCE = 1e-9
TIMEOUT_GRACE_S = 5.0  # beyond the solver's own limit: process start, pickling, extraction
DEFAULT_FOLLOW_S = 1.0
BAD_STATUSES = frozenset({"infeasible", "model_invalid"})

Outcome = Literal["installed", "rejected", "worse", "failed", "timeout", "skipped"]


class SolveFn(Protocol):
    """What the planner calls in the worker: a module-level (picklable) function."""

    def __call__(
        self, instance: Any, /, *, previous: Plan | None, time_limit_s: float, version: int
    ) -> Plan: ...


@dataclass(frozen=True, slots=True)
class SolveResult:
    outcome: Outcome
    reason: str  # why the solve ran
    detail: str  # why it was installed or not
    version: int | None
    solve_s: float


def is_worse(new: Plan, current: Plan | None) -> bool:
    """A lower objective than the current plan's for the very same inputs."""
    if current is None or new.inputs_digest != current.inputs_digest:
        return False
    return new.solver.objective < current.solver.objective - OBJECTIVE_TOLERANCE


class Planner:
    def __init__(
        self,
        *,
        solve: SolveFn,
        build_instance: Callable[[], Any],
        store: PlanStore,
        install: Callable[[Plan], None],
        validate: Callable[[Plan], None] | None = None,
        executor: Executor | None = None,
        period_s: float = 60.0,
        time_limit_s: float = 10.0,
        timeout_grace_s: float = TIMEOUT_GRACE_S,
        observe_solve: Callable[[str, float], None] | None = None,
    ) -> None:
        self._solve = solve
        self._build_instance = build_instance
        self.store = store
        self._install = install
        self._validate = validate
        self._executor = executor
        self._owns_executor = executor is None
        self.period_s = period_s
        self.time_limit_s = time_limit_s
        self.timeout_grace_s = timeout_grace_s
        self._observe = observe_solve or (lambda result, seconds: None)
        self.current: Plan | None = None
        self.history: list[SolveResult] = []
        self._events: list[str] = []
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()

    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(max_workers=1)
        return self._executor

    def close(self) -> None:
        if self._executor is not None and self._owns_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # --- starting and following -------------------------------------------------------------

    def resume(self) -> Plan | None:
        """Install the store's latest plan, if it still validates (a restart resumes it)."""
        try:
            plan = self.store.latest()
        except PlacementError as exc:
            log.warning("cannot resume a plan: %s", exc)
            return None
        if plan is None:
            return None
        try:
            if self._validate is not None:
                self._validate(plan)
        except PlacementError as exc:
            log.warning("stored plan %d no longer validates: %s", plan.version, exc)
            return None
        self._adopt(plan)
        return plan

    def _adopt(self, plan: Plan) -> None:
        self._install(plan)
        self.current = plan

    async def follow_once(self) -> bool:
        """Install a newer plan another process published; True when one was installed."""
        latest = await asyncio.to_thread(self.store.latest_version)
        if latest is None or (self.current is not None and latest <= self.current.version):
            return False
        plan = await asyncio.to_thread(self.store.get, latest)
        if plan is None:
            return False
        self._adopt(plan)
        return True

    # --- solving ----------------------------------------------------------------------------

    def trigger(self, reason: str) -> None:
        """Ask for a re-solve soon (a replica lost, a demand shift); safe from any callback on
        the event loop."""
        self._events.append(reason)
        self._wake.set()

    async def solve_once(self, reason: str = "manual") -> SolveResult:
        async with self._lock:  # one solve at a time per process
            result = await self._solve_locked(reason)
        self.history.append(result)
        del self.history[:-100]
        self._observe(result.outcome, result.solve_s)
        log.info("solve (%s): %s %s", reason, result.outcome, result.detail)
        return result

    async def _solve_locked(self, reason: str) -> SolveResult:
        started = time.perf_counter()

        def result(outcome: Outcome, detail: str, version: int | None = None) -> SolveResult:
            return SolveResult(outcome, reason, detail, version, time.perf_counter() - started)

        try:
            instance = self._build_instance()
            version = await asyncio.to_thread(self.store.next_version)
        except PlacementError as exc:
            return result("skipped", str(exc))
        call = functools.partial(
            self._solve,
            instance,
            previous=self.current,
            time_limit_s=self.time_limit_s,
            version=version,
        )
        loop = asyncio.get_running_loop()
        try:
            plan = await asyncio.wait_for(
                loop.run_in_executor(self.executor(), call),
                timeout=self.time_limit_s + self.timeout_grace_s,
            )
        except TimeoutError:
            # the stuck worker cannot be interrupted; start afresh so the next solve is not
            # queued behind it (the old process ends at its own solver limit)
            if self._owns_executor and self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None
            return result("timeout", f"no plan within {self.time_limit_s} s", version)
        except Exception as exc:  # a crash in the worker must not take the service down
            return result("failed", f"{type(exc).__name__}: {exc}", version)
        return await self._accept(plan, result)

    async def _accept(self, plan: Plan, result: Callable[..., SolveResult]) -> SolveResult:
        if plan.solver.status in BAD_STATUSES:
            return result("rejected", f"solver status {plan.solver.status}", plan.version)
        try:
            if self._validate is not None:
                self._validate(plan)
        except PlacementError as exc:
            return result("rejected", str(exc), plan.version)
        if is_worse(plan, self.current):
            return result(
                "worse",
                f"objective {plan.solver.objective:.6g} < {self.current.solver.objective:.6g}"
                if self.current
                else "worse",
                plan.version,
            )
        try:
            await asyncio.to_thread(self.store.put, plan)
        except PlacementError as exc:
            return result("failed", f"cannot persist: {exc}", plan.version)
        self._adopt(plan)
        return result("installed", f"plan {plan.version} ({plan.solver.status})", plan.version)

    async def run(self, *, follow_s: float = DEFAULT_FOLLOW_S, solve: bool = True) -> None:
        """Solve every ``period_s`` and on :meth:`trigger`; follow the store in between."""
        next_solve = time.monotonic() if solve else float("inf")
        while True:
            timeout = max(0.0, min(follow_s, next_solve - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            try:
                await self.follow_once()
            except PlacementError as exc:
                log.warning("cannot follow the plan store: %s", exc)
            if solve and (self._wake.is_set() or time.monotonic() >= next_solve):
                reasons = ", ".join(self._events) or "period"
                self._events.clear()
                self._wake.clear()
                await self.solve_once(reasons)
                next_solve = time.monotonic() + self.period_s
            self._wake.clear()
