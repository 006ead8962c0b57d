"""Request outcomes into the Parquet telemetry store, from every way a service process learns
them: the gateway mode (:mod:`serving.gateway.outcome`), the endpoint picker and
``POST /v1/outcomes`` (:func:`lease_row`); and the replicas' scraped state
(:mod:`serving.replica_scraper`) as ``replica_samples``, which the predictors' training frame
joins each request with (the load it met).

Rows are buffered and appended as new Parquet files
(``training.telemetry.write_telemetry``) every ``flush_s`` seconds or ``flush_rows`` rows, off
the event loop. Each write adds uniquely named files, so several processes may share one store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from serving.leases import Lease
from serving.route.types import ReplicaState
from training.telemetry.schema import REQUEST_COLUMNS, SAMPLE_COLUMNS, frame_from_rows
from training.telemetry.store import write_telemetry

log = logging.getLogger(__name__)

DEFAULT_FLUSH_S = 5.0
DEFAULT_FLUSH_ROWS = 5000


class TelemetrySink:
    """Buffered ``requests`` rows, appended to a Parquet store."""

    def __init__(
        self,
        store: Path,
        *,
        flush_s: float = DEFAULT_FLUSH_S,
        flush_rows: int = DEFAULT_FLUSH_ROWS,
    ) -> None:
        self.store = store
        self.flush_s = flush_s
        self.flush_rows = flush_rows
        self.rows: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.written = 0
        self.samples_written = 0
        self._writing: asyncio.Task[None] | None = None

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.flush_rows and self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self.flush())

    def add_sample(self, row: dict[str, Any]) -> None:
        """A ``replica_samples`` row (written with the next flush)."""
        self.samples.append(row)

    async def flush(self) -> None:
        rows, self.rows = self.rows, []
        samples, self.samples = self.samples, []
        try:
            if rows or samples:
                requests = frame_from_rows(rows, REQUEST_COLUMNS) if rows else None
                sampled = frame_from_rows(samples, SAMPLE_COLUMNS) if samples else None
                await asyncio.to_thread(write_telemetry, self.store, requests, sampled)
                self.written += len(rows)
                self.samples_written += len(samples)
        except (PlacementError, OSError) as exc:
            log.error(
                "telemetry: %d request and %d sample rows not written: %s",
                len(rows),
                len(samples),
                exc,
            )
        finally:
            self._writing = None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            await self.flush()


def lease_row(
    lease: Lease,
    state: ReplicaState | None,
    *,
    request_id: int,
    routed_wall: float,
    finished_wall: float,
    ttft_s: float | None,
    tpot_s: float | None,
    output_tokens: int,
    error: str,
) -> dict[str, Any]:
    """The ``requests`` row of a decision whose outcome was reported (``POST /v1/outcomes``,
    the endpoint picker): arrival is when it was routed, finish when it was reported."""
    query = lease.query
    arrival = datetime.fromtimestamp(routed_wall, UTC)
    finish = datetime.fromtimestamp(max(finished_wall, routed_wall), UTC)
    served = not error
    first = arrival + timedelta(seconds=ttft_s) if ttft_s is not None else finish
    return {
        "request_id": request_id,
        "arrival_time": arrival,
        "first_token_time": min(first, finish) if served else None,
        "finish_time": finish if served else None,
        "input_tokens": query.input_tokens,
        "cached_tokens": 0,
        "output_tokens": output_tokens,
        "replica": lease.replica_id,
        "accelerator": state.accelerator if state is not None else None,
        "model": state.model if state is not None else query.model,
        "tp": state.tp if state is not None else None,
        "tenant": query.tenant,
        "request_class": query.request_class,
        "backlog_requests": 0,
        "backlog_prefill_tokens": 0,
        "error": error,
        "ttft_s": ttft_s if served else None,
        "tpot_s": tpot_s if served else None,
        "e2e_s": (finish - arrival).total_seconds() if served else None,
    }


def wall_of(monotonic_s: float, clock_now: float) -> float:
    """A service-clock time as Unix seconds."""
    return time.time() - (clock_now - monotonic_s)
