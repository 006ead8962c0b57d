"""Follow the registry's champion: when the version holding ``@champion`` is not the one the
installed plan's capacities came from, ask the planner for a re-solve (its worker loads the new
version: :func:`placement.solver.capacity.default_capacity`). No restart.

The version is polled every ``interval_s`` in a thread (a local SQLite store is read without
MLflow: one indexed query), and at once after this process's own retraining promoted a
candidate (:meth:`ChampionWatch.check`). Each new version triggers one re-solve; a solve that
is skipped (no demand yet) is not retried for the same version until the plan changes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from placement.plan.capacity_source import parse_model_source
from serving.service import PlacementService

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 5.0


def plan_model_version(service: PlacementService) -> str | None:
    """The model version the installed plan's capacities came from (None: the roofline prior,
    another source, or no plan)."""
    plan = service.plan
    source = None if plan is None else parse_model_source(plan.capacity_source)
    return None if source is None or source.version is None else str(source.version)


class ChampionWatch:
    """``read_version`` returns the champion's version now (None: no champion); ``trigger``
    is the planner's."""

    def __init__(
        self,
        service: PlacementService,
        trigger: Callable[[str], None],
        *,
        read_version: Callable[[], str | None] | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.service = service
        self._trigger = trigger
        self._read = read_version or _champion_version
        self.interval_s = interval_s
        self.champion: str | None = None  # the version last read
        self._asked_for: str | None = None  # the version a re-solve was last triggered for

    async def check(self) -> bool:
        """Read the champion's version; trigger a re-solve when it differs from the installed
        plan's and none was asked for it yet. True when one was triggered."""
        try:
            version = await asyncio.to_thread(self._read)
        except Exception as exc:  # the tracking server is down: try again on the next poll
            log.warning("cannot read the champion's version: %s", exc)
            return False
        if version != self.champion:
            log.info("champion of the latency model: version %s", version)
        self.champion = version
        if version is None or version == plan_model_version(self.service):
            return False
        if version == self._asked_for:
            return False
        self._asked_for = version
        self._trigger(f"champion version {version}")
        return True

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.interval_s)


def _champion_version() -> str | None:
    from training.tracking import champion_version

    return champion_version()
