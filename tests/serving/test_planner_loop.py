from __future__ import annotations

import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "api"))
from api_fakes import make_plan

from placement.errors import PlanRejected
from placement.plan import Plan
from serving.plan_store import DirectoryPlanStore
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
