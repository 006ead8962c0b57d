"""The planner loop: re-solve on a period and on events, off the event loop, and swap in a
plan only when it is good.

**Nothing proportional to the demand or the plan runs on the event loop.** A solve takes a
*snapshot* of its inputs on the loop (cheap: a list copy of the demand window and the replica
set), *encodes* it in a thread, and ships it to a worker process (:mod:`serving.workers`)
that builds the solver instance and solves it; the version is allocated, the plan validated,
persisted and installed from threads. The route path never waits on the planner.

A failed, timed-out, invalid or worse plan never replaces a good one, and its reason is logged
at WARNING (the outcome is counted by ``observe_solve``: ``placement_solve_seconds{result}``).
Whether a valid plan may replace the installed one is the ``validate`` callback's policy
(:mod:`serving.plan_guard`: never an empty plan over a non-empty one, an explicit policy for
replica loss). A good plan is persisted to the plan store first and installed second, so every
process following the store sees the same versions.

*Worse* means a lower objective for the same inputs (the same ``inputs_digest``); when the
inputs changed (a replica was lost, demand shifted) objectives are not comparable and a valid
plan for the new inputs wins.

**Versions only move forward.** New versions are allocated above the installed one
(``store.next_version(above=…)``), so an emptied store (Redis flushed, a plan directory wiped)
cannot restart numbering below it; a follower that finds the store empty re-publishes its
installed plan there.

Several service processes share plans through the store: each one follows it (polls the
latest version) and installs what another published, under the same policy. On start,
:meth:`Planner.resume` installs the newest stored plan that reads and validates, walking back
past a corrupt or invalid latest one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from placement.errors import PlacementError
from placement.plan import Plan
from placement.plan.capacity_source import describe
from serving.plan_store.base import CorruptPlan, PlanStore, PlanStoreError
from serving.workers import WorkerPool

log = logging.getLogger(__name__)

OBJECTIVE_TOLERANCE = 1e-9
# beyond the solver's own limit: the worker's start (imports), building the instance from the
# demand window (seconds for 50,000 requests), extraction and the round trip
TIMEOUT_GRACE_S = 120.0
DEFAULT_FOLLOW_S = 1.0
RESUME_DEPTH = 50  # stored versions tried, newest first, before resuming with no plan
BAD_STATUSES = frozenset({"infeasible", "model_invalid"})

Outcome = Literal["installed", "rejected", "worse", "failed", "timeout", "skipped"]
QUIET_OUTCOMES = frozenset({"installed", "worse", "skipped"})  # the rest log at WARNING


class SolveSkipped(PlacementError):
    """Nothing worth solving now (no demand yet, no healthy replica): the plan stays."""


class SolveFn(Protocol):
    """What the planner calls in the worker: a module-level (picklable) function of the
    encoded snapshot."""

    def __call__(
        self, inputs: Any, /, *, previous: Plan | None, time_limit_s: float, version: int
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


def _identity(inputs: Any) -> Any:
    return inputs


class Planner:
    """``snapshot`` runs on the event loop and must be cheap (copy references, no work per
    request); it may raise :class:`SolveSkipped`. ``encode`` turns the snapshot into what is
    shipped to the worker, in a thread. ``validate(plan, installed)`` raises
    :class:`~placement.errors.PlanRejected` when ``plan`` may not replace ``installed``; it
    runs in a thread. ``install`` swaps a plan in, from a thread. ``executor`` replaces the
    worker process pool (tests pass threads)."""

    def __init__(
        self,
        *,
        solve: SolveFn,
        snapshot: Callable[[], Any],
        store: PlanStore,
        install: Callable[[Plan], None],
        encode: Callable[[Any], Any] = _identity,
        validate: Callable[[Plan, Plan | None], None] | None = None,
        executor: Executor | None = None,
        period_s: float = 60.0,
        time_limit_s: float = 10.0,
        timeout_grace_s: float = TIMEOUT_GRACE_S,
        observe_solve: Callable[[str, float], None] | None = None,
    ) -> None:
        self._solve = solve
        self._snapshot = snapshot
        self._encode = encode
        self.store = store
        self._install = install
        self._validate = validate
        self._given_executor = executor
        self._pool: WorkerPool | None = None
        self.period_s = period_s
        self.time_limit_s = time_limit_s
        self.timeout_grace_s = timeout_grace_s
        self._observe = observe_solve or (lambda result, seconds: None)
        self.current: Plan | None = None
        self.history: list[SolveResult] = []
        self._events: list[str] = []
        self._refused_version: int | None = None  # a followed version refused (warned once)
        self._closed = False
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()

    # --- the worker processes ---------------------------------------------------------------

    def executor(self) -> Executor:
        """Where solves (and what-if jobs) run: the given executor, else this planner's worker
        pool, replaced when a worker died."""
        if self._given_executor is not None:
            return self._given_executor
        if self.stopping():
            raise SolveSkipped("the planner is stopping")
        if self._pool is None or self._pool.broken:
            self._discard_pool()
            self._pool = WorkerPool()
        return self._pool

    def worker_pids(self) -> list[int]:
        return [] if self._pool is None else self._pool.pids()

    def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()

    def close(self) -> None:
        """Stop the worker processes (a solve in progress included: it ends "skipped") and
        wait for them; no solve starts after this. Safe from any thread, more than once."""
        self._closed = True
        self._discard_pool()

    def stopping(self) -> bool:
        """:meth:`close` was called: no solve starts, one in progress ends "skipped"."""
        return self._closed

    # --- starting and following -------------------------------------------------------------

    def resume(self) -> Plan | None:
        """Install the newest stored plan that reads and validates (a restart resumes it),
        walking back past a corrupt or no longer valid latest one."""
        try:
            latest = self.store.latest_version()
        except PlacementError as exc:
            log.warning("cannot resume a plan: %s", exc)
            return None
        if latest is None:
            return None
        for version in range(latest, max(0, latest - RESUME_DEPTH), -1):
            try:
                plan = self.store.get(version)
                if plan is None:
                    continue
                if self._validate is not None:
                    self._validate(plan, None)
            except PlacementError as exc:
                log.warning("cannot resume stored plan %d: %s", version, exc)
                continue
            if version != latest:
                log.warning("resumed plan %d, the newest stored plan that is valid", version)
            self._adopt(plan)
            return plan
        return None

    def _adopt(self, plan: Plan) -> None:
        self._install(plan)
        self.current = plan

    async def follow_once(self) -> bool:
        """Install a newer plan another process published, if it may replace this one; True
        when one was installed. An emptied store gets the installed plan back."""
        latest = await asyncio.to_thread(self.store.latest_version)
        if latest is None:
            if self.current is not None:
                await self._republish(self.current)
            return False
        if self.current is not None and latest <= self.current.version:
            return False
        if latest == self._refused_version:
            return False
        try:
            plan = await asyncio.to_thread(self.store.get, latest)
            if plan is None:
                return False
            if self._validate is not None:
                await asyncio.to_thread(self._validate, plan, self.current)
        except PlacementError as exc:
            if isinstance(exc, PlanStoreError) and not isinstance(exc, CorruptPlan):
                raise  # the store is unreachable for now: try again on the next poll
            # unreadable, or it may not replace the installed plan: say so once
            self._refused_version = latest
            log.warning("not following stored plan %d: %s", latest, exc)
            return False
        await asyncio.to_thread(self._adopt, plan)
        return True

    async def _republish(self, plan: Plan) -> None:
        try:
            await asyncio.to_thread(self.store.put, plan)
        except PlanStoreError as exc:  # another process re-published it first, or the store is down
            log.info("plan store empty; not re-published plan %d: %s", plan.version, exc)
            return
        log.warning("plan store was empty: re-published the installed plan %d", plan.version)

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
        level = logging.INFO if result.outcome in QUIET_OUTCOMES else logging.WARNING
        current = self.current
        suffix = (
            f"; keeping plan {current.version}"
            if current is not None and result.outcome != "installed"
            else ""
        )
        log.log(level, "solve (%s): %s: %s%s", reason, result.outcome, result.detail, suffix)
        return result

    async def _solve_locked(self, reason: str) -> SolveResult:
        started = time.perf_counter()

        def result(outcome: Outcome, detail: str, version: int | None = None) -> SolveResult:
            return SolveResult(outcome, reason, detail, version, time.perf_counter() - started)

        current = self.current
        try:
            if self.stopping():
                raise SolveSkipped("the planner is stopping")
            inputs = await asyncio.to_thread(self._encode, self._snapshot())
        except PlacementError as exc:
            return result("skipped", str(exc))
        try:
            version = await asyncio.to_thread(
                functools.partial(
                    self.store.next_version, above=0 if current is None else current.version
                )
            )
        except PlacementError as exc:
            return result("failed", f"cannot allocate a plan version: {exc}")
        call = functools.partial(
            self._solve, inputs, previous=current, time_limit_s=self.time_limit_s, version=version
        )
        loop = asyncio.get_running_loop()
        try:
            plan = await asyncio.wait_for(
                loop.run_in_executor(self.executor(), call),
                timeout=self.time_limit_s + self.timeout_grace_s,
            )
        except TimeoutError:
            # the stuck worker cannot be interrupted: end it, so the next solve is not queued
            # behind it
            await asyncio.to_thread(self._discard_pool)
            return result(
                "timeout", f"no plan within {self.time_limit_s + self.timeout_grace_s} s", version
            )
        except Exception as exc:  # a crash in the worker must not take the service down
            if self.stopping():
                return result("skipped", "the planner is stopping", version)
            if isinstance(exc, BrokenExecutor):
                await asyncio.to_thread(self._discard_pool)
            return result("failed", f"{type(exc).__name__}: {exc}", version)
        return await self._accept(plan, result)

    async def _accept(self, plan: Plan, result: Callable[..., SolveResult]) -> SolveResult:
        current = self.current
        if plan.solver.status in BAD_STATUSES:
            return result("rejected", f"solver status {plan.solver.status}", plan.version)
        if current is not None and plan.version <= current.version:
            return result(
                "rejected",
                f"version {plan.version} is not above the installed {current.version}",
                plan.version,
            )
        try:
            if self._validate is not None:
                await asyncio.to_thread(self._validate, plan, current)
        except PlacementError as exc:
            return result("rejected", str(exc), plan.version)
        if is_worse(plan, current):
            assert current is not None
            return result(
                "worse",
                f"objective {plan.solver.objective:.6g} < {current.solver.objective:.6g}",
                plan.version,
            )
        try:
            await asyncio.to_thread(self.store.put, plan)
        except PlacementError as exc:
            return result("failed", f"cannot persist: {exc}", plan.version)
        await asyncio.to_thread(self._adopt, plan)
        return result(
            "installed",
            f"plan {plan.version} ({plan.solver.status}; capacities from "
            f"{describe(plan.capacity_source)})",
            plan.version,
        )

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
