"""The goodput benchmark: policies × loads on one workload and fleet, in the simulator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress

from bench.plots import plot_goodput_curves
from bench.policies import POLICIES, PolicyContext, make_policy
from placement.domain.fleet import Fleet, ReplicaSpec
from placement.errors import InputError
from placement.report import print_table, write_json
from sim.capacity import fleet_capacity, rate_multiplier
from sim.costmodel.base import IterationCostModel
from sim.costmodel.factory import cost_model_for_replica
from sim.metrics import summarise
from sim.simulator import SimConfig, Simulator
from sim.workloads.base import Workload

TABLE_COLUMNS = (
    "policy",
    "load",
    "goodput_rps",
    "slo_attainment",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p99_s",
    "prefix_hit_rate",
    "jain",
    "utilisation",
    "cost_per_m_output_tokens",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingBench:
    workload: Workload
    fleet: Fleet
    policies: tuple[str, ...]
    loads: tuple[float, ...]
    seed: int = 0
    config: SimConfig = field(default_factory=SimConfig)


def parse_policies(text: str) -> tuple[str, ...]:
    names = (
        tuple(POLICIES)
        if text.strip() == "all"
        else tuple(p.strip() for p in text.split(",") if p.strip())
    )
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise InputError(
            f"unknown policy {unknown[0] if unknown else '(none)'}",
            field="--policies",
            expected="'all' or some of " + ", ".join(POLICIES),
        )
    return names


def parse_loads(text: str) -> tuple[float, ...]:
    try:
        loads = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(
            f"'{text}' is not a list of numbers", field="--loads", expected="e.g. 0.5,1.0,1.5"
        ) from None
    if not loads or any(x <= 0 for x in loads):
        raise InputError("loads must be positive", field="--loads", expected="e.g. 0.5,1.0,1.5")
    return loads


def run_one(
    bench: RoutingBench,
    policy: str,
    load: float,
    cost_model: Callable[[ReplicaSpec], IterationCostModel],
    weights: list[float],
) -> dict[str, Any]:
    """One simulated run; ``weights`` are the replicas' nominal capacities (req/s)."""
    rate = rate_multiplier(load, bench.workload, sum(weights))
    wl = bench.workload.scaled(rate)
    top = max(weights)
    ctx = PolicyContext(seed=bench.seed, block_tokens=bench.workload.block_tokens)
    sim = Simulator(
        bench.fleet,
        make_policy(policy, ctx),
        wl,
        cost_model=cost_model,
        config=bench.config,
        weights=[w / top for w in weights],
    )
    result = sim.run()
    row = summarise(result, wl).as_row()
    row.update(load=load, rate_multiplier=rate, wall_s=result.wall_s, events=result.events)
    return row


def run_routing_bench(
    bench: RoutingBench, *, out: Path | None, plot: Path | None = None
) -> dict[str, Any]:
    """Run every (policy, load); print the table; write JSON and the PNG when asked."""
    runs: list[dict[str, Any]] = []
    weights = fleet_capacity(bench.fleet, bench.workload, cost_model_for_replica)
    capacity = sum(weights)
    cases = [(p, load) for load in bench.loads for p in bench.policies]
    with Progress(transient=True) as progress:
        task = progress.add_task("simulating", total=len(cases))
        for policy, load in cases:
            progress.update(task, description=f"{policy} @ load {load}")
            runs.append(run_one(bench, policy, load, cost_model_for_replica, weights))
            progress.advance(task)
    payload: dict[str, Any] = {
        "workload": bench.workload.name,
        "fleet": bench.fleet.name,
        "requests": len(bench.workload),
        "trace_window_s": bench.workload.duration_s,
        "nominal_capacity_rps": capacity,
        "runs": runs,
    }
    print_table(
        f"goodput: {bench.workload.name} on {bench.fleet.name} "
        f"({len(bench.workload)} requests; load 1.0 = {capacity:.1f} req/s)",
        runs,
        TABLE_COLUMNS,
    )
    if out is not None:
        write_json(out, payload)
        plot = plot or out.with_suffix(".png")
    if plot is not None:
        plot_goodput_curves(runs, plot, title=f"{bench.workload.name} on {bench.fleet.name}")
        payload["plot"] = str(plot)
    return payload
