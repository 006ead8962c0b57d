"""Solver scale: synthetic fleets of 50, 500 and 2,000 replicas with 10× as many prefix groups
and 200 tenants, solved from scratch and re-solved (warm, against the first plan) after a 10%
demand shift; plus the 1,000 × 10,000 target and a backend comparison on a small instance.

Instances are generated directly (no simulator): four model pools (a quarter of the replicas
each) of three accelerator kinds; group rates lognormal, tenants Zipf-distributed over groups,
70% interactive / 30% batch; capacity at SLO from a closed form in uncached prompt and output
tokens; demand scaled to 90% of the fleet's capacity; credits Zipf over tenants (Σ = 0.8).
The shift redraws the rate of a random 10% of the demand units (× U(0.5, 1.5)).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from models.capacity import Slo
from placement.plan.schema import Plan
from placement.report import print_table, write_json
from placement.solver.instance import Instance
from placement.solver.solve import SolveOptions, solve_plan

MODELS = ("llama-3-8b", "qwen2.5-32b", "mixtral-8x7b", "llama-2-70b")
ACCELERATORS = (("H100-SXM", 4.0, 1.0), ("A100-80G", 2.5, 0.55), ("L40S", 1.5, 0.3))
SIZES = (50, 500, 2000)
TARGET = 1000
GROUPS_PER_REPLICA = 10
TENANTS = 200
LOAD = 0.9


def synthetic_instance(replicas: int, *, seed: int = 0, tenants: int = TENANTS) -> Instance:
    rng = np.random.default_rng(seed)
    n_m, n_a = len(MODELS), len(ACCELERATORS)
    model_of = np.arange(replicas) % n_m
    acc_of = rng.choice(n_a, size=replicas, p=[0.4, 0.35, 0.25])
    kind = model_of * n_a + acc_of
    kind_cost = np.asarray([c for _ in MODELS for _, c, _ in ACCELERATORS])
    speed = np.asarray([s for _ in MODELS for _, _, s in ACCELERATORS])
    model_scale = np.repeat(np.asarray([1.0, 0.45, 0.6, 0.3]), n_a)

    n_g = GROUPS_PER_REPLICA * replicas
    zipf = 1.0 / np.arange(1, tenants + 1) ** 1.1
    g_tenant = rng.choice(tenants, size=n_g, p=zipf / zipf.sum())
    g_model = rng.integers(0, n_m, size=n_g)
    g_class = (rng.random(n_g) < 0.3).astype(np.int64)  # 0 interactive, 1 batch
    g_prefix = np.exp(rng.uniform(np.log(512), np.log(8192), n_g)).round()
    g_input = g_prefix + rng.lognormal(np.log(300), 0.8, n_g)
    g_output = rng.lognormal(np.log(200), 0.7, n_g)
    g_rate = rng.lognormal(0.0, 1.0, n_g)
    # defaults: one per (tenant, model, class) seen, a fifth of the demand
    keys = np.unique(np.stack([g_tenant, g_model, g_class], axis=1), axis=0)
    d_rate = rng.lognormal(0.0, 0.5, len(keys))
    d_rate *= 0.25 * g_rate.sum() / d_rate.sum()

    unit_tenant = np.concatenate([g_tenant, keys[:, 0]])
    unit_model = np.concatenate([g_model, keys[:, 1]])
    unit_class = np.concatenate([g_class, keys[:, 2]])
    unit_key = np.concatenate([rng.integers(0, 1 << 62, n_g), np.full(len(keys), -1)])
    unit_input = np.concatenate([g_input, rng.lognormal(np.log(1500), 0.5, len(keys))])
    unit_output = np.concatenate([g_output, rng.lognormal(np.log(200), 0.5, len(keys))])
    unit_prefix = np.concatenate([g_prefix, np.zeros(len(keys))])
    unit_rate = np.concatenate([g_rate, d_rate])

    def cap(prompt: np.ndarray) -> np.ndarray:
        per = 40.0 * 1000.0 / (prompt / 4.0 + 2.0 * unit_output + 500.0)  # req/s on an H100
        slo = np.where(unit_class == 1, 1.15, 1.0)
        c = per[:, None] * slo[:, None] * (speed * model_scale)[None, :]
        same = (np.arange(n_m * n_a)[None, :] // n_a) == unit_model[:, None]
        return np.where(same, c, 0.0)

    capacity = cap(np.maximum(unit_input - unit_prefix, 1.0))
    capacity_cold = cap(unit_input)
    # scale demand so the fleet runs at LOAD of its capacity (per pool, for the mean mix)
    counts = np.bincount(kind, minlength=n_m * n_a)
    for m in range(n_m):
        sel = unit_model == m
        mix = unit_rate[sel].sum() / (unit_rate[sel] / capacity[sel].max(axis=1)).sum()
        pool_rps = sum(
            counts[k] * mix * speed[k] * model_scale[k] / (speed[m * n_a] * model_scale[m * n_a])
            for k in range(m * n_a, (m + 1) * n_a)
        )
        unit_rate[sel] *= LOAD * pool_rps / unit_rate[sel].sum()
    credit = zipf**0.5
    credit = 0.8 * credit / credit.sum()
    return Instance(
        fleet=f"synthetic-{replicas}",
        capacity_source="synthetic",
        window_s=60.0,
        replica_ids=tuple(f"r{i}" for i in range(replicas)),
        replica_kind=kind.astype(np.int64),
        replica_model=model_of.astype(np.int64),
        replica_cost=kind_cost[kind],
        replica_kv_budget=np.full(replicas, 200_000.0),
        replica_healthy=np.ones(replicas, dtype=bool),
        replica_group=tuple(ACCELERATORS[a][0].lower() for a in acc_of),
        kind_accelerator=tuple(a for _ in MODELS for a, _, _ in ACCELERATORS),
        kind_tp=np.ones(n_m * n_a, dtype=np.int64),
        kind_cost=kind_cost,
        models=MODELS,
        tenants=tuple(f"tenant-{i}" for i in range(tenants)),
        credit_share=credit,
        burst_cap=np.ones(tenants),
        tenant_weight=np.ones(tenants),
        classes=("interactive", "batch"),
        class_priority=np.asarray([0, 1], dtype=np.int64),
        class_sheddable=np.asarray([False, True]),
        class_slo=(Slo(2.0, 0.1), Slo(30.0, 0.3)),
        unit_tenant=unit_tenant.astype(np.int64),
        unit_model=unit_model.astype(np.int64),
        unit_class=unit_class.astype(np.int64),
        unit_key=unit_key.astype(np.int64),
        unit_depth=np.maximum(unit_prefix // 512, 0).astype(np.int64),
        unit_rate=unit_rate,
        unit_input=unit_input,
        unit_output=unit_output,
        unit_prefix=unit_prefix,
        capacity=capacity,
        capacity_cold=capacity_cold,
    )


def shifted(inst: Instance, *, seed: int = 1, share: float = 0.1) -> Instance:
    rng = np.random.default_rng(seed)
    rate = inst.unit_rate.copy()
    pick = rng.random(len(rate)) < share
    rate[pick] *= rng.uniform(0.5, 1.5, int(pick.sum()))
    return dataclasses.replace(inst, unit_rate=rate)


def _row(inst: Instance, plan: Plan, phase: str, wall_s: float) -> dict[str, Any]:
    s = plan.solver
    return {
        "phase": phase,
        "replicas": inst.n_replicas,
        "groups": int((inst.unit_key >= 0).sum()),
        "tenants": len(inst.tenants),
        "solve_s": round(s.solve_s, 3),
        "wall_s": round(wall_s, 3),
        "objective": s.objective,
        "bound": s.bound,
        "gap": s.gap,
        "churn": s.churn,
        "status": s.status,
        "backend": s.backend,
    }


def _timed(inst: Instance, **kw: Any) -> tuple[Plan, float]:
    t0 = time.perf_counter()
    plan = solve_plan(inst, **kw)
    return plan, time.perf_counter() - t0


def run_solver_bench(
    *,
    sizes: tuple[int, ...] = (*SIZES, TARGET),
    time_limit_s: float = 10.0,
    backend: str = "mathopt-glop",
    compare: bool = True,
    out: Path | None = None,
) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    opts = SolveOptions(backend=backend)
    for n in sorted(set(sizes)):
        inst = synthetic_instance(n)
        first, wall = _timed(inst, time_limit_s=time_limit_s, options=opts)
        runs.append(_row(inst, first, "cold", wall))
        moved = shifted(inst)
        again, wall = _timed(moved, previous=first, time_limit_s=time_limit_s, options=opts)
        runs.append(_row(moved, again, "re-solve +10% shift", wall))
    print_table(
        "solver scale",
        runs,
        [
            "phase",
            "replicas",
            "groups",
            "tenants",
            "solve_s",
            "wall_s",
            "objective",
            "bound",
            "gap",
            "churn",
            "status",
        ],
    )
    payload: dict[str, Any] = {"runs": runs, "time_limit_s": time_limit_s}
    if compare:
        payload["backends"] = compare_backends(time_limit_s=time_limit_s)
    if out is not None:
        write_json(out, payload)
    return payload


def compare_backends(
    *, replicas: int = 50, time_limit_s: float = 10.0, repeats: int = 3
) -> list[dict[str, Any]]:
    """The same instance through each backend: LP relax-and-round (HiGHS, GLOP, PDLP) and the
    mixed-integer program with ``y`` binary (HiGHS MIP, SCIP, CP-SAT)."""
    inst = synthetic_instance(replicas, seed=3)
    rows = []
    for label, opts in (
        ("lp-round highs", SolveOptions(backend="mathopt-highs")),
        ("lp-round glop", SolveOptions(backend="mathopt-glop")),
        ("lp-round pdlp", SolveOptions(backend="mathopt-pdlp")),
        ("mip highs", SolveOptions(backend="mathopt-highs", integer_warm=True)),
        ("mip scip", SolveOptions(backend="mathopt-scip", integer_warm=True)),
        ("mip cp-sat", SolveOptions(backend="cp-sat")),
    ):
        walls, plan = [], None
        for _ in range(repeats):
            plan, wall = _timed(inst, time_limit_s=time_limit_s, options=opts)
            walls.append(wall)
        assert plan is not None
        rows.append(
            {
                "backend": label,
                "replicas": replicas,
                "groups": int((inst.unit_key >= 0).sum()),
                "wall_s": round(statistics.median(walls), 3),
                "objective": plan.solver.objective,
                "bound": plan.solver.bound,
                "gap": plan.solver.gap,
                "status": plan.solver.status,
            }
        )
    print_table(
        "backends",
        rows,
        ["backend", "replicas", "groups", "wall_s", "objective", "bound", "gap", "status"],
    )
    return rows
