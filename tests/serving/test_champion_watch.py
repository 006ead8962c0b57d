"""The champion watch asks for one re-solve per new champion version that the installed plan's
capacities did not come from, and survives a registry it cannot read."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from plan_builders import make_plan

from serving.champion_watch import ChampionWatch, capacity_statement, plan_model_version
from serving.route import PlacementRoutePath
from serving.service import PlacementService


def _watch(versions: list[str | Exception | None], plan_source: str | None) -> Any:
    service = PlacementService(route_path_factory=lambda r: PlacementRoutePath(list(r.values())))
    if plan_source is not None:
        service.plan = make_plan(capacity_source=plan_source)
    else:
        service.plan = make_plan()  # the roofline prior
    triggered: list[str] = []

    def read() -> str | None:
        value = versions.pop(0)
        if isinstance(value, Exception):
            raise value
        return value

    return ChampionWatch(service, triggered.append, read_version=read), triggered, service


def test_a_new_version_triggers_one_resolve() -> None:
    watch, triggered, _ = _watch(["3", "3", "4"], "models:/placement-latency/2 (@champion)")
    assert asyncio.run(watch.check())
    assert not asyncio.run(watch.check())  # asked already for version 3
    assert asyncio.run(watch.check())
    assert triggered == ["champion version 3", "champion version 4"]
    assert watch.champion == "4"


def test_the_plans_own_version_or_no_champion_triggers_nothing() -> None:
    watch, triggered, service = _watch(["2", None], "models:/placement-latency/2 (@champion)")
    assert plan_model_version(service) == "2"
    assert not asyncio.run(watch.check())
    assert not asyncio.run(watch.check())
    assert triggered == []


def test_a_plan_from_the_prior_resolves_once_a_champion_exists() -> None:
    watch, triggered, service = _watch([None, "1"], None)  # make_plan: the roofline prior
    assert plan_model_version(service) is None
    assert not asyncio.run(watch.check())
    assert asyncio.run(watch.check())
    assert triggered == ["champion version 1"]


def test_an_unreadable_registry_is_retried_not_fatal() -> None:
    watch, triggered, _ = _watch([OSError("tracking server down"), "5"], None)
    assert not asyncio.run(watch.check())
    assert asyncio.run(watch.check())
    assert triggered == ["champion version 5"]


def test_the_log_says_plainly_when_capacities_come_from_the_prior_once_per_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch, _, service = _watch([None, None, "1", "1"], None)
    with caplog.at_level(logging.INFO, logger="serving.champion_watch"):
        asyncio.run(watch.check())
        asyncio.run(watch.check())  # the same plan: said once
        said = [r for r in caplog.records if "capacities from" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        assert "roofline prior" in said[0].getMessage()
        assert "no champion" in said[0].getMessage()
        service.plan = make_plan(
            version=2, capacity_source="models:/placement-latency/1 (@champion)"
        )
        asyncio.run(watch.check())
        asyncio.run(watch.check())
    said = [r for r in caplog.records if "capacities from" in r.getMessage()]
    assert len(said) == 2 and said[1].levelno == logging.INFO
    assert "models:/placement-latency/1" in said[1].getMessage()


def test_the_statement_names_a_pending_champion() -> None:
    prior = make_plan()
    assert "champion version 3 is promoted" in capacity_statement(prior, "3")
    from_v2 = make_plan(capacity_source="models:/placement-latency/2 (@champion)")
    assert capacity_statement(from_v2, "2").endswith("models:/placement-latency/2 (@champion)")
    assert "champion is now version 3" in capacity_statement(from_v2, "3")
    assert capacity_statement(None, "3") == "no plan yet"
