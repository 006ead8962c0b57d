from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "api"))
sys.path.insert(0, str(Path(__file__).parent))
from api_fakes import make_plan
from redis_server import RedisServer

from placement.errors import PlanRejected
from placement.plan import Plan
from serving.plan_store import DirectoryPlanStore
from serving.plan_store.redis import RedisPlanStore
from serving.planner import Planner


def solve_ok(instance: Any, *, previous: Plan | None, time_limit_s: float, version: int) -> Plan:
    objective, digest = instance
    return make_plan(version, objective=objective, digest=digest)


def solve_crash(instance: Any, *, previous: Plan | None, time_limit_s: float, version: int) -> Plan:
    raise RuntimeError("solver exploded")


def solve_slow(instance: Any, *, previous: Plan | None, time_limit_s: float, version: int) -> Plan:
    time.sleep(0.5)
    return make_plan(version)


def solve_infeasible(
    instance: Any, *, previous: Plan | None, time_limit_s: float, version: int
) -> Plan:
    plan = make_plan(version)
    return plan.model_copy(
        update={"solver": plan.solver.model_copy(update={"status": "infeasible"})}
    )


class Harness:
    def __init__(self, tmp_path: Path, solve: Any = solve_ok, **kwargs: Any) -> None:
        self.installed: list[int] = []
        self.instance: tuple[float, str] = (1.0, "d1")
        self.store = DirectoryPlanStore(tmp_path)
        self.planner = Planner(
            solve=solve,
            snapshot=lambda: self.instance,
            store=self.store,
            install=lambda plan: self.installed.append(plan.version),
            executor=ThreadPoolExecutor(max_workers=2),
            **kwargs,
        )


def test_a_good_plan_is_persisted_installed_and_resumed(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    result = asyncio.run(h.planner.solve_once("test"))
    assert result.outcome == "installed"
    assert h.installed == [result.version]
    assert h.store.latest_version() == result.version
    again = Harness(tmp_path)
    resumed = again.planner.resume()
    assert resumed is not None and resumed.version == result.version
    assert again.installed == [result.version]


def test_failed_timed_out_rejected_or_worse_plans_never_replace_a_good_one(tmp_path: Path) -> None:
    h = Harness(tmp_path, time_limit_s=0.05, timeout_grace_s=0.05)
    good = asyncio.run(h.planner.solve_once("first"))
    assert good.outcome == "installed"

    def outcome(solve: Any, **changes: Any) -> str:
        h.planner._solve = solve
        for k, v in changes.items():
            setattr(h, k, v)
        return asyncio.run(h.planner.solve_once("again")).outcome

    assert outcome(solve_crash) == "failed"
    assert outcome(solve_slow) == "timeout"
    assert outcome(solve_infeasible) == "rejected"
    assert outcome(solve_ok, instance=(0.5, "d1")) == "worse"
    assert h.installed == [good.version]
    assert h.store.latest_version() == good.version
    # new inputs (a replica lost): objectives are not comparable, the valid plan wins
    assert outcome(solve_ok, instance=(0.5, "d2")) == "installed"


def test_a_plan_that_fails_validation_is_rejected(tmp_path: Path) -> None:
    def refuse(plan: Plan, installed: Plan | None) -> None:
        raise PlanRejected("replica h100-9 is not in the fleet")

    h = Harness(tmp_path, validate=refuse)
    result = asyncio.run(h.planner.solve_once("test"))
    assert result.outcome == "rejected"
    assert "h100-9" in result.detail
    assert h.installed == []


def test_a_trigger_wakes_the_loop_and_it_follows_the_store(tmp_path: Path) -> None:
    h = Harness(tmp_path, period_s=3600)

    async def scenario() -> None:
        task = asyncio.create_task(h.planner.run(follow_s=0.01))
        for _ in range(200):  # the first solve runs at start
            if h.installed:
                break
            await asyncio.sleep(0.01)
        h.instance = (2.0, "d1")
        h.planner.trigger("replica lost")
        for _ in range(200):
            if len(h.installed) >= 2:
                break
            await asyncio.sleep(0.01)
        # another process publishes a newer plan: this one installs it
        h.store.put(make_plan(50))
        for _ in range(200):
            if h.installed[-1] == 50:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert len(h.installed) == 3
    assert h.installed[-1] == 50
    assert h.planner.history[-1].reason == "replica lost"


def test_the_solve_runs_in_a_worker_process(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    installed: list[Plan] = []
    planner = Planner(
        solve=solve_ok, snapshot=lambda: (3.0, "dp"), store=store, install=installed.append
    )
    try:
        result = asyncio.run(planner.solve_once("process"))
    finally:
        planner.close()
    assert result.outcome == "installed", result.detail
    assert installed[0].solver.objective == 3.0


def test_versions_stay_monotonic_when_the_directory_store_is_wiped(tmp_path: Path) -> None:
    h = Harness(tmp_path / "plans")
    for _ in range(3):
        assert asyncio.run(h.planner.solve_once("period")).outcome == "installed"
    assert h.installed == [1, 2, 3]
    shutil.rmtree(tmp_path / "plans")  # wiped (or a new empty directory mounted)
    h.store.root.mkdir()
    # the follower finds the store empty and carries the installed plan forward
    assert asyncio.run(h.planner.follow_once()) is False
    assert h.store.latest_version() == 3
    result = asyncio.run(h.planner.solve_once("period"))
    assert result.outcome == "installed" and result.version == 4
    assert h.installed == [1, 2, 3, 4]


def test_versions_stay_monotonic_when_redis_restarts_empty(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    store = RedisPlanStore(redis_server.url)
    installed: list[int] = []
    planner = Planner(
        solve=solve_ok,
        snapshot=lambda: (1.0, "d1"),
        store=store,
        install=lambda plan: installed.append(plan.version),
        executor=ThreadPoolExecutor(max_workers=1),
    )
    try:
        for _ in range(3):
            assert asyncio.run(planner.solve_once("period")).outcome == "installed"
        redis_server.restart()  # no persistence: empty, its version counter back at 0
        # solving before any follow: the version still goes above the installed one
        result = asyncio.run(planner.solve_once("period"))
        assert result.outcome == "installed" and result.version is not None
        assert result.version > 3
        assert installed == sorted(installed) and len(set(installed)) == len(installed)
        redis_server.restart()
        assert asyncio.run(planner.follow_once()) is False
        assert store.latest_version() == installed[-1]  # re-published for followers, restarts
        again = Planner(
            solve=solve_ok,
            snapshot=lambda: (1.0, "d1"),
            store=store,
            install=lambda plan: None,
            executor=ThreadPoolExecutor(max_workers=1),
        )
        resumed = again.resume()
        assert resumed is not None and resumed.version == installed[-1]
    finally:
        store.close()


def test_a_newer_plan_another_process_published_is_followed_only_if_it_may_replace(
    tmp_path: Path,
) -> None:
    def refuse_empty(plan: Plan, installed: Plan | None) -> None:
        if installed is not None and plan.solver.objective == 0:
            raise PlanRejected("empty plan")

    h = Harness(tmp_path, validate=refuse_empty)
    assert asyncio.run(h.planner.solve_once("period")).outcome == "installed"
    h.store.put(make_plan(9, objective=0.0))  # published by a process with no demand yet
    assert asyncio.run(h.planner.follow_once()) is False
    assert h.installed == [1]
    h.store.put(make_plan(10, objective=2.0))
    assert asyncio.run(h.planner.follow_once()) is True
    assert h.installed == [1, 10]


def test_a_corrupt_plan_another_process_published_is_not_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(tmp_path)
    assert asyncio.run(h.planner.solve_once("period")).outcome == "installed"
    (tmp_path / "plan-00000002.json").write_text('{"schema": "placement.plan/v1", "vers')
    (tmp_path / "LATEST").write_text("2")
    with caplog.at_level(logging.WARNING, logger="serving.planner"):
        for _ in range(3):  # polled every second: warned once
            assert asyncio.run(h.planner.follow_once()) is False
    assert h.installed == [1]
    assert len([r for r in caplog.records if "not following stored plan 2" in r.message]) == 1
