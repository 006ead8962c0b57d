"""Plan safety with the service as ``placement serve`` wires it (real route path, real solver,
real plan files; solves in threads unless the test is about the worker process)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from placement.domain.fleet import load_fleet
from placement.domain.prefix import chain_block_ids
from placement.plan import Plan
from placement.solver.capacity import FixedCapacity
from serving.api.runtime import ServiceRuntime
from serving.api.settings import Settings
from serving.planner import Planner
from serving.planning import DemandSnapshot
from serving.route.types import RouteQuery
from serving.service import PlacementService
from serving.wiring import build_app

FLEET = """\
name: two-pools
replicas:
  - kind: llama
    accelerator: H100-SXM
    count: 2
    model: llama-3-8b
  - kind: qwen
    accelerator: H100-SXM
    count: 1
    model: qwen2.5-32b
    tp: 2
"""
TENANTS = ("acme", "globex", "initech", "umbrella")
CAPACITY = FixedCapacity({"H100-SXM": 40.0})


def runtime(tmp_path: Path, *, threads: bool = True) -> ServiceRuntime:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = Settings(
        environment="development", fleet=fleet, plan_dir=tmp_path / "plans", solve_time_limit_s=5
    )
    app = build_app(
        settings,
        solve_executor=ThreadPoolExecutor(1) if threads else None,
        capacity=CAPACITY,  # the roofline prior's tables take seconds per replica kind
    )
    rt: ServiceRuntime = app.state.runtime
    return rt


def route_demand(
    service: PlacementService,
    n: int,
    *,
    seed: int = 0,
    models: tuple[str, ...] = ("qwen2.5-32b", "llama-3-8b", "llama-3-8b"),
    prefixes: int = 20,
) -> None:
    """``n`` requests routed and completed: 4 tenants, ``models`` in turn, ``prefixes``
    shared prefixes (1–6 blocks) across tenants and models, then 1–4 blocks of their own."""
    rng = random.Random(seed)
    shared = [
        chain_block_ids(rng.getrandbits(62) for _ in range(rng.randint(1, 6)))
        for _ in range(prefixes)
    ]
    for i in range(n):
        prefix = rng.choice(shared)
        tail = (rng.getrandbits(62) for _ in range(rng.randint(1, 4)))
        hashes = prefix + chain_block_ids(tail, root=prefix[-1])
        routed = service.route(
            RouteQuery(
                tenant=TENANTS[i % len(TENANTS)],
                model=models[i % len(models)],
                request_class="interactive",
                block_hashes=hashes,
                input_tokens=512 * len(hashes),
                max_output_tokens=128,
            )
        )
        service.complete(routed.decision_id, output_tokens=128, ok=True)


def solve(planner: Planner, reason: str = "test") -> Any:
    return asyncio.run(planner.solve_once(reason))


def good_plan(tmp_path: Path) -> Plan:
    """A real plan solved from real demand, published to ``tmp_path/plans``."""
    rt = runtime(tmp_path)
    assert rt.planner is not None
    route_demand(rt.service, 400)
    result = solve(rt.planner)
    assert result.outcome == "installed", result.detail
    plan = rt.service.plan
    assert plan is not None and len(plan.tenants) == 4 and len(plan.replicas) == 3
    return plan


def test_a_restart_does_not_replace_the_resumed_plan_with_one_solved_on_no_demand(
    tmp_path: Path,
) -> None:
    good = good_plan(tmp_path)
    rt = runtime(tmp_path)  # the restart: the same store, an empty demand window
    assert rt.planner is not None and rt.service.plan == good
    result = solve(rt.planner, "period")
    assert result.outcome == "skipped" and "no demand" in result.detail
    # and were the empty window solved anyway, the guard refuses the empty plan it gives
    fleet = load_fleet(tmp_path / "fleet.yaml")
    rt.planner._snapshot = lambda: DemandSnapshot(fleet, [], (), CAPACITY)
    result = solve(rt.planner, "period")
    assert result.outcome == "rejected" and "empty plan (no tenant)" in result.detail
    assert rt.service.plan == good
    assert rt.planner.store.latest_version() == good.version


def test_replica_loss_policy(tmp_path: Path) -> None:
    good = good_plan(tmp_path)
    rt = runtime(tmp_path)
    service, planner = rt.service, rt.planner
    assert planner is not None and service.plan == good
    route_demand(service, 400, seed=1)
    # every replica briefly unhealthy: no solve, the plan stays
    for rid in service.replicas:
        service.mark_health(rid, False)
    result = solve(planner, "replicas lost")
    assert result.outcome == "skipped" and "no healthy replica" in result.detail
    # a whole pool lost but still registered: the plan without it is refused
    for rid in ("llama-0", "llama-1"):
        service.mark_health(rid, True)
    result = solve(planner, "replica qwen-0 lost")
    assert result.outcome == "rejected", result.detail
    assert "drops the qwen2.5-32b pool" in result.detail
    assert service.plan == good
    # one replica of a pool lost: planned around
    service.mark_health("qwen-0", True)
    service.mark_health("llama-1", False)
    result = solve(planner, "replica llama-1 lost")
    assert result.outcome == "installed", result.detail
    assert service.plan is not None and service.plan.version > good.version
    assert {r.id for r in service.plan.replicas} == {"llama-0", "qwen-0"}
    # a pool retired on purpose (deregistered) may leave the plan
    service.mark_health("llama-1", True)
    service.deregister_replica("qwen-0")
    route_demand(service, 400, seed=2, models=("llama-3-8b",))
    result = solve(planner, "replica qwen-0 deregistered")
    assert result.outcome == "installed", result.detail
    assert service.plan is not None
    assert {r.model for r in service.plan.replicas} == {"llama-3-8b"}


def test_a_corrupt_latest_plan_falls_back_to_the_newest_valid_one(tmp_path: Path) -> None:
    good = good_plan(tmp_path)
    rt = runtime(tmp_path)
    assert rt.planner is not None
    route_demand(rt.service, 400, seed=3)
    newer = solve(rt.planner)
    assert newer.outcome == "installed" and newer.version > good.version
    latest = tmp_path / "plans" / f"plan-{newer.version:08d}.json"
    latest.write_text(latest.read_text()[:100])  # truncated, as by a full disk
    restarted = runtime(tmp_path)
    assert restarted.service.plan == good
    assert restarted.service.readiness() == (True, f"plan {good.version}")


def test_a_failed_solve_keeps_the_plan_and_says_why_at_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = good_plan(tmp_path)
    rt = runtime(tmp_path)
    assert rt.planner is not None
    route_demand(rt.service, 100)

    def explode(*args: Any, **kwargs: Any) -> Plan:
        raise RuntimeError("solver exploded")

    rt.planner._solve = explode
    with caplog.at_level(logging.WARNING, logger="serving.planner"):
        result = solve(rt.planner, "period")
    assert result.outcome == "failed"
    assert rt.service.plan == good
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("solver exploded" in r.getMessage() for r in warned), caplog.text
    assert f"keeping plan {good.version}" in caplog.text
    metrics = rt.service.metrics.registry
    assert metrics.get_sample_value("placement_solve_seconds_count", {"result": "failed"}) == 1


def test_the_event_loop_keeps_answering_while_the_worker_builds_and_solves(
    tmp_path: Path,
) -> None:
    """The instance is built in the worker process: from a 20,000-request window with 2,000
    prefixes that takes a second or more, and the loop's longest stall while a (warm) worker
    builds and solves stays far below it."""
    rt = runtime(tmp_path, threads=False)
    planner, window = rt.planner, rt.service.demand
    assert planner is not None and window is not None
    rng = random.Random(0)
    shared = [chain_block_ids(rng.getrandbits(62) for _ in range(3)) for _ in range(2_000)]
    for i in range(20_000):
        prefix = rng.choice(shared)
        tail = chain_block_ids((rng.getrandbits(62) for _ in range(2)), root=prefix[-1])
        query = RouteQuery(
            tenant=TENANTS[i % len(TENANTS)],
            model="llama-3-8b",
            request_class="interactive",
            block_hashes=prefix + tail,
            input_tokens=2560,
            max_output_tokens=128,
        )
        window.record(query, i / 1_000)

    async def scenario() -> tuple[Any, Any, float]:
        first = await planner.solve_once("start")  # starts the worker process
        solving = asyncio.create_task(planner.solve_once("forced"))
        worst = 0.0
        while not solving.done():
            t0 = time.perf_counter()
            await asyncio.sleep(0.005)
            worst = max(worst, time.perf_counter() - t0 - 0.005)
        return first, solving.result(), worst

    try:
        first, second, worst_stall_s = asyncio.run(scenario())
    finally:
        planner.close()
    assert first.outcome == "installed", first.detail
    assert second.outcome in ("installed", "worse"), second.detail
    # the loop's longest wait is a small part of the work it did not wait for
    assert worst_stall_s < 0.25, f"the loop stalled {worst_stall_s:.3f} s during the solve"
    assert second.solve_s > 2 * worst_stall_s, (second.solve_s, worst_stall_s)
    assert planner.worker_pids() == []  # closed: the worker is gone
