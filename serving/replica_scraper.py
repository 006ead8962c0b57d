"""Scrape every registered replica's vLLM ``/metrics`` at an interval into its ReplicaState.

Fetching runs in threads (urllib blocks); the state is written back on the event loop, so the
route path's lock-free reads see whole updates. A replica that fails ``lost_after`` scrapes in a
row is marked unhealthy (the planner re-solves); one good scrape brings it back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from placement.errors import PlacementError
from serving.scrape import scrape
from serving.service import PlacementService, ReplicaRegistration

log = logging.getLogger(__name__)

DEFAULT_LOST_AFTER = 3

ScrapeFn = Callable[[ReplicaRegistration, float], dict[str, Any]]


def scrape_registration(reg: ReplicaRegistration, timeout_s: float) -> dict[str, Any]:
    s = reg.state
    return scrape(
        reg.metrics_url,
        timeout_s,
        replica=s.id,
        accelerator=s.accelerator,
        model=s.model,
        tp=s.tp,
        model_name=s.labels.get("model_name"),
    )


class ReplicaScraper:
    def __init__(
        self,
        service: PlacementService,
        *,
        interval_s: float,
        lost_after: int = DEFAULT_LOST_AFTER,
        fetch: ScrapeFn = scrape_registration,
    ) -> None:
        self.service = service
        self.interval_s = interval_s
        self.lost_after = lost_after
        self._fetch = fetch

    async def scrape_all(self) -> None:
        regs = list(self.service.registrations.values())
        timeout = max(0.1, min(2.0, self.interval_s))
        results = await asyncio.gather(
            *(asyncio.to_thread(self._fetch, reg, timeout) for reg in regs),
            return_exceptions=True,
        )
        for reg, row in zip(regs, results, strict=True):
            if self.service.registrations.get(reg.state.id) is not reg:
                continue  # deregistered or replaced while we were scraping
            if isinstance(row, BaseException):
                self._failed(reg, row)
            else:
                self._apply(reg, row)

    def _apply(self, reg: ReplicaRegistration, row: dict[str, Any]) -> None:
        s = reg.state
        s.num_requests_running = float(row["num_requests_running"])
        s.num_requests_waiting = float(row["num_requests_waiting"])
        s.kv_cache_usage_perc = float(row["kv_cache_usage_perc"])
        s.scraped_at = time.monotonic()
        reg.scrape_failures = 0
        self.service.mark_health(s.id, True)

    def _failed(self, reg: ReplicaRegistration, exc: BaseException) -> None:
        reg.scrape_failures += 1
        self.service.metrics.count_scrape_failure(reg.state.id)
        if not isinstance(exc, PlacementError):
            log.warning("scrape of %s crashed: %r", reg.state.id, exc)
        if reg.scrape_failures >= self.lost_after:
            self.service.mark_health(reg.state.id, False)

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            await self.scrape_all()
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
