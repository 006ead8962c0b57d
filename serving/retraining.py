"""Retraining on a schedule, inside the service: every ``every_hours`` hours or every
``every_records`` new request records in the telemetry store, whichever comes first, run
:func:`training.retrain.retrain` (train a candidate on the latest window, score it and the
champion on the same later held-out rows, log both to MLflow, promote only if at least as
good) in a spawned worker process (:class:`serving.workers.WorkerPool`: niced, dies with the
service), never on the event loop. A promotion is handed to ``on_promoted`` (the champion
watch), so the planner re-solves with the new champion at once.

New records are counted from the store's ``requests`` Parquet footers, only for files not seen
before: every process writing to the store counts, and a check costs a directory listing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from placement.errors import InputError
from serving.workers import WorkerPool

log = logging.getLogger(__name__)

DEFAULT_CHECK_S = 30.0
Result = Literal["promoted", "kept", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class RetrainJob:
    """What the worker is given (picklable)."""

    telemetry_dir: str
    window_s: float | None
    experiment: str


@dataclass(frozen=True, slots=True)
class RetrainOutcome:
    result: Result
    reason: str
    seconds: float
    candidate_version: str | None = None
    champion_version: str | None = None  # after the run


def retrain_in_worker(job: RetrainJob) -> RetrainOutcome:
    """One retraining, in the worker process (module level: pickled by reference). Too little
    telemetry is ``skipped`` with the reason, not an error."""
    from training.retrain import retrain
    from training.tracking import mlflow_warnings_only

    started = time.perf_counter()
    mlflow_warnings_only()
    try:
        done = retrain(job.telemetry_dir, window_s=job.window_s, experiment=job.experiment)
    except InputError as exc:
        return RetrainOutcome("skipped", str(exc), time.perf_counter() - started)
    d = done.decision
    return RetrainOutcome(
        "promoted" if d.promoted else "kept",
        d.reason,
        time.perf_counter() - started,
        candidate_version=d.candidate_version,
        champion_version=d.candidate_version if d.promoted else d.champion_version,
    )


class NewRecords:
    """Rows in the store's ``requests`` files that appeared since :meth:`reset`."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self._seen: set[Path] = set()
        self.new = 0

    def _files(self) -> list[Path]:
        return sorted((self.store / "requests").glob("date=*/*.parquet"))

    def reset(self) -> None:
        """Count from now: the files there now are seen."""
        self._seen.update(self._files())
        self.new = 0

    def count(self) -> int:
        """New rows since :meth:`reset` (reads only the footers of files not seen yet)."""
        import pyarrow.parquet as pq

        for path in self._files():
            if path in self._seen:
                continue
            try:
                self.new += pq.read_metadata(path).num_rows
            except OSError:  # a file half-removed by an operator: skip it
                continue
            self._seen.add(path)
        return self.new


class RetrainSchedule:
    """``run_job`` replaces the worker process (tests); ``on_promoted`` is awaited after a
    promotion; ``observe(result, seconds)`` counts each run."""

    def __init__(
        self,
        telemetry_dir: Path,
        *,
        every_hours: float | None,
        every_records: int | None,
        window_hours: float | None,
        experiment: str,
        check_s: float = DEFAULT_CHECK_S,
        on_promoted: Callable[[], Awaitable[object]] | None = None,
        observe: Callable[[str, float], None] | None = None,
        run_job: Callable[[RetrainJob], RetrainOutcome] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.records = NewRecords(telemetry_dir)
        self.job = RetrainJob(
            str(telemetry_dir),
            None if window_hours is None else window_hours * 3600.0,
            experiment,
        )
        self.every_s = None if every_hours is None else every_hours * 3600.0
        self.every_records = every_records
        self.check_s = check_s
        self._on_promoted = on_promoted
        self._observe = observe or (lambda result, seconds: None)
        self._run_job = run_job
        self._clock = clock
        self._last = clock()
        self._pool: WorkerPool | None = None
        self.history: list[RetrainOutcome] = []

    async def start(self) -> None:
        """Count records and hours from now."""
        await asyncio.to_thread(self.records.reset)
        self._last = self._clock()

    async def due(self) -> str | None:
        """Why a retraining is due now (None: not yet)."""
        if self.every_records is not None:
            new = await asyncio.to_thread(self.records.count)
            if new >= self.every_records:
                return f"{new} new records"
        if self.every_s is not None and self._clock() - self._last >= self.every_s:
            return f"{(self._clock() - self._last) / 3600:.3g} h since the last retraining"
        return None

    async def run_once(self, reason: str) -> RetrainOutcome:
        """Retrain now, off the event loop; log and count what happened."""
        await asyncio.to_thread(self.records.reset)
        self._last = self._clock()
        started = time.perf_counter()
        log.info("retraining (%s) on %s", reason, self.job.telemetry_dir)
        try:
            if self._run_job is not None:
                outcome = await asyncio.to_thread(self._run_job, self.job)
            else:
                self._pool = WorkerPool()
                loop = asyncio.get_running_loop()
                outcome = await loop.run_in_executor(self._pool, retrain_in_worker, self.job)
        except Exception as exc:  # a crash in the worker must not take the service down
            outcome = RetrainOutcome(
                "failed", f"{type(exc).__name__}: {exc}", time.perf_counter() - started
            )
        finally:
            await asyncio.to_thread(self.close)
        self.history.append(outcome)
        del self.history[:-20]
        self._observe(outcome.result, outcome.seconds)
        level = logging.WARNING if outcome.result == "failed" else logging.INFO
        log.log(
            level,
            "retraining (%s): %s in %.1f s: %s",
            reason,
            outcome.result,
            outcome.seconds,
            outcome.reason,
        )
        if outcome.result == "promoted" and self._on_promoted is not None:
            await self._on_promoted()
        return outcome

    async def run(self) -> None:
        await self.start()
        while True:
            await asyncio.sleep(self.check_s)
            reason = await self.due()
            if reason is not None:
                await self.run_once(reason)

    def close(self) -> None:
        """Stop the worker process (a retraining in progress included)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.stop()
