"""Follow the registry's champion: when the version holding ``@champion`` is not the one the
installed plan's capacities came from, ask the planner for a re-solve (its worker loads the new
version: :func:`placement.solver.capacity.default_capacity`). No restart. It also says, in the
log and on ``/healthz`` (:func:`capacity_statement`), where the plan's capacities come from:
the roofline prior is said plainly.

The version is polled every ``interval_s`` in a thread (a local SQLite store is read without
MLflow: one indexed query), and at once after this process's own retraining promoted a
candidate (:meth:`ChampionWatch.check`). Each new version triggers one re-solve; a solve that
is skipped (no demand yet) is not retried for the same version until the plan changes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from placement.plan import Plan
from placement.plan.capacity_source import ROOFLINE_SOURCE, describe, parse_model_source
from serving.service import PlacementService

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 5.0


def capacity_statement(plan: Plan | None, champion: str | None) -> str:
    """Where ``plan``'s capacities come from, said plainly (``/healthz``, the log);
    ``champion`` is the registry's champion version now, if known."""
    if plan is None:
        return "no plan yet"
    said = f"plan {plan.version}: capacities from {describe(plan.capacity_source)}"
    source = parse_model_source(plan.capacity_source)
    if source is not None:
        if source.version is not None and champion not in (None, str(source.version)):
            said += f"; champion is now version {champion}, re-solving with it"
        return said
    if plan.capacity_source != ROOFLINE_SOURCE:
        return said
    if champion is not None:
        return said + f"; champion version {champion} is promoted, re-solving with it"
    return said + (
        ": no champion in the model registry (`placement retrain --telemetry DIR` trains and "
        "promotes one; PLACEMENT_RETRAIN_EVERY_HOURS does it on a schedule)"
    )


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
        self._said: tuple[int, str] | None = None  # the plan whose capacities were last logged

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
        self._say_capacity()
        if version is None or version == plan_model_version(self.service):
            return False
        if version == self._asked_for:
            return False
        self._asked_for = version
        self._trigger(f"champion version {version}")
        return True

    def _say_capacity(self) -> None:
        """Log where the installed plan's capacities come from when that changed: at WARNING
        when from the roofline prior (capacities no model learned)."""
        plan = self.service.plan
        if plan is None or (self._said is not None and self._said[1] == plan.capacity_source):
            return
        self._said = (plan.version, plan.capacity_source)
        level = logging.WARNING if plan.capacity_source == ROOFLINE_SOURCE else logging.INFO
        log.log(level, "%s", capacity_statement(plan, self.champion))

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.interval_s)


def _champion_version() -> str | None:
    from training.tracking import champion_version

    return champion_version()
