"""Scrape every registered replica's vLLM ``/metrics`` at an interval into its ReplicaState.

Every replica is asked at every interval, on the event loop, over a kept-alive connection and
conditionally (:mod:`serving.scrape_session`): a replica whose page did not change since the
last one read answers 304 and its state is only stamped fresh again; a changed page is parsed
in a worker thread and written back on the event loop, so the route path's lock-free reads see
whole updates. A replica that fails ``lost_after`` scrapes in a row is marked unhealthy (the
planner re-solves); one good scrape, a 304 included, brings it back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from placement.errors import PlacementError
from serving.lora_info import Adapters, lora_adapters
from serving.scrape import read_page
from serving.scrape_session import ScrapeSession
from serving.service import PlacementService, ReplicaRegistration
from serving.telemetry_sink import TelemetrySink

log = logging.getLogger(__name__)

DEFAULT_LOST_AFTER = 3

# (the row, or None: unchanged; its ETag; the engine's LoRA adapters, None: not exported)
Scraped = tuple[dict[str, Any] | None, str | None, Adapters | None]


def read_registration_page(reg: ReplicaRegistration, text: str) -> dict[str, Any]:
    s = reg.state
    return read_page(
        text,
        reg.metrics_url,
        replica=s.id,
        accelerator=s.accelerator,
        model=s.model,
        tp=s.tp,
        model_name=s.labels.get("model_name"),
    )


def _read(reg: ReplicaRegistration, text: str, etag: str | None) -> Scraped:
    """The page ``text`` read in full: its row and the engine's LoRA adapters."""
    row = read_registration_page(reg, text)
    return row, etag, lora_adapters(text, reg.metrics_url) if reg.state.max_loras > 0 else None


class ReplicaScraper:
    def __init__(
        self,
        service: PlacementService,
        *,
        interval_s: float,
        lost_after: int = DEFAULT_LOST_AFTER,
        session: ScrapeSession | None = None,
        sink: TelemetrySink | None = None,
    ) -> None:
        self.service = service
        # each scrape as a replica_samples row in the telemetry store (None: not recorded); an
        # unchanged page (304) is recorded as the last page read, stamped now
        self.sink = sink
        self._last_rows: dict[str, dict[str, Any]] = {}
        self.interval_s = interval_s
        self.lost_after = lost_after
        self.session = session or ScrapeSession()
        self.pages_read = 0  # answers parsed in full
        self.pages_unchanged = 0  # 304 answers: the last page still holds

    async def scrape_all(self) -> None:
        regs = list(self.service.registrations.values())
        timeout = max(0.1, min(2.0, self.interval_s))
        results = await asyncio.gather(
            *(self._scrape(reg, timeout) for reg in regs), return_exceptions=True
        )
        for reg, result in zip(regs, results, strict=True):
            if self.service.registrations.get(reg.state.id) is not reg:
                continue  # deregistered or replaced while we were scraping
            if isinstance(result, BaseException):
                self._failed(reg, result)
            else:
                self._apply(reg, *result)

    async def _scrape(self, reg: ReplicaRegistration, timeout_s: float) -> Scraped:
        text, etag = await self.session.fetch(reg.metrics_url, timeout_s, reg.metrics_etag)
        if text is None:
            return None, etag, None
        return await asyncio.to_thread(_read, reg, text, etag)

    def _apply(
        self,
        reg: ReplicaRegistration,
        row: dict[str, Any] | None,
        etag: str | None,
        adapters: Adapters | None,
    ) -> None:
        s = reg.state
        if self.sink is not None:
            self._record(s.id, row)
        if row is None:
            self.pages_unchanged += 1
        else:
            s.num_requests_running = float(row["num_requests_running"])
            s.num_requests_waiting = float(row["num_requests_waiting"])
            s.kv_cache_usage_perc = float(row["kv_cache_usage_perc"])
            if adapters is not None:
                s.running_lora_adapters, s.waiting_lora_adapters = adapters
            reg.metrics_etag = etag
            self.pages_read += 1
        s.scraped_at = time.monotonic()
        if adapters is not None:
            # the route path reads the engine's slot handovers from every scrape, not only
            # from those it happens to decide after
            scraped = getattr(self.service.route_path, "scraped", None)
            if scraped is not None:
                scraped(s)
        # the gauges hold as of now: first tokens from here on have left their waiting count
        s.first_tokens_at_scrape = s.first_tokens
        reg.scrape_failures = 0
        self.service.mark_health(s.id, True)

    def _record(self, replica_id: str, row: dict[str, Any] | None) -> None:
        assert self.sink is not None
        if row is None:
            last = self._last_rows.get(replica_id)
            if last is None:
                return
            row = {**last, "time": datetime.now(UTC)}
        self._last_rows[replica_id] = row
        self.sink.add_sample(row)

    def _failed(self, reg: ReplicaRegistration, exc: BaseException) -> None:
        reg.scrape_failures += 1
        reg.metrics_etag = None  # the next answer is read in full
        self.service.metrics.count_scrape_failure(reg.state.id)
        if not isinstance(exc, PlacementError):
            log.warning("scrape of %s crashed: %r", reg.state.id, exc)
        if reg.scrape_failures >= self.lost_after:
            self.service.mark_health(reg.state.id, False)

    async def run(self) -> None:
        try:
            while True:
                started = time.monotonic()
                await self.scrape_all()
                await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            await self.session.close()
