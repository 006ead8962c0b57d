"""The loop's plans against the simulator: each plan's predicted attainment (of the traffic it
admits) beside the attainment the simulator measured while that plan was installed.

A plan serves from its solve to the next one (the first, solved from the head, from the start
of the run). Simulated attainment is of the requests that arrived in that span and were
admitted (the gate's refusals are not counted; a refused request is not one the plan's
prediction covers), and of all of them. Issue 14 §6 asks the two to agree within 5 points.

A plan predicts for the demand it was solved on (its window: the head for the first plan, the
period before its solve for the others), and serves the next period, whose demand differs.
:func:`at_planned_load` separates the two: each plan installed alone (no re-solve) over the
whole run, its attainment measured on the requests of its own window — the simulator at the
load the plan planned for.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.loop.plans import SolveRecord
from placement.domain.requests import Request, RequestClass
from sim.metrics import RequestTable, request_table

MIN_REQUESTS = 50  # a plan that served fewer is not compared
DISAGREES_POINTS = 5.0


def refused(req: Request) -> bool:
    """Refused by the gate (an error that is not a lost request)."""
    return bool(req.error) and not req.error.startswith("lost")


def installed(records: Sequence[SolveRecord]) -> list[tuple[SolveRecord, float, float]]:
    """Each plan that was installed (a record with a prediction) and the span it served: from
    its solve (the first plan: from the start) to the next installed plan's."""
    kept = [r for r in records if r.predicted_attainment is not None]
    return [
        (rec, rec.at_s if i > 0 else -np.inf, kept[i + 1].at_s if i + 1 < len(kept) else np.inf)
        for i, rec in enumerate(kept)
    ]


def _outcomes(
    requests: Sequence[Request], classes: Mapping[str, RequestClass]
) -> tuple[RequestTable, npt.NDArray[np.bool_]]:
    """The requests' table and which of them the gate admitted."""
    table = request_table(list(requests), dict(classes))
    admitted = ~np.fromiter((refused(r) for r in requests), np.bool_, len(requests))
    return table, admitted


def plan_agreement(
    records: Sequence[SolveRecord],
    requests: Sequence[Request],
    classes: Mapping[str, RequestClass],
) -> list[dict[str, Any]]:
    """Per plan that was installed (a record with a prediction): its prediction, what the
    simulator measured over the span it served, and the gap in points."""
    table, admitted_all = _outcomes(requests, classes)
    rows = []
    for rec, lo, hi in installed(records):
        span = (table.arrival >= lo) & (table.arrival < hi)
        admitted = span & admitted_all
        if admitted.sum() < MIN_REQUESTS:
            continue
        assert rec.predicted_attainment is not None
        simulated = float(table.met[admitted].mean())
        gap = 100.0 * (rec.predicted_attainment - simulated)
        rows.append(
            {
                "at_s": rec.at_s,
                "version": rec.version,
                "predicted": rec.predicted_attainment,
                "plan_shed_share": rec.shed_share,
                "simulated_admitted": simulated,
                "simulated_all": float(table.met[span].mean()),
                "refused_share": float(1.0 - admitted.sum() / span.sum()),
                "requests": int(span.sum()),
                "gap_points": gap,
                "disagrees": abs(gap) > DISAGREES_POINTS,
            }
        )
    return rows


def window_attainment(
    requests: Sequence[Request],
    classes: Mapping[str, RequestClass],
    lo: float,
    hi: float,
) -> tuple[float, int] | None:
    """Attainment of the requests admitted among those that arrived in ``[lo, hi)``, and how
    many arrived (None if fewer than :data:`MIN_REQUESTS` were admitted)."""
    table, admitted_all = _outcomes(requests, classes)
    span = (table.arrival >= lo) & (table.arrival < hi)
    admitted = span & admitted_all
    if admitted.sum() < MIN_REQUESTS:
        return None
    return float(table.met[admitted].mean()), int(span.sum())


def at_planned_load(
    records: Sequence[SolveRecord],
    window_s: float,
    simulate: Callable[[SolveRecord, bool], tuple[Sequence[Request], Mapping[str, RequestClass]]],
) -> list[dict[str, Any]]:
    """Per installed plan: its prediction beside the simulator's attainment on the window it
    was solved on, with only that plan installed. ``simulate(record, on_head)`` runs it (the
    first plan, solved on the head, on the head; the others on the report part); the window of
    a re-solve at ``at_s`` is ``[at_s - window_s, at_s)``, the head's is all of it."""
    rows = []
    for i, (rec, _, _) in enumerate(installed(records)):
        assert rec.predicted_attainment is not None
        on_head = i == 0
        requests, classes = simulate(rec, on_head)
        lo, hi = (-np.inf, np.inf) if on_head else (rec.at_s - window_s, rec.at_s)
        got = window_attainment(requests, classes, lo, hi)
        if got is None:
            continue
        simulated, n = got
        gap = 100.0 * (rec.predicted_attainment - simulated)
        rows.append(
            {
                "at_s": rec.at_s,
                "version": rec.version,
                "predicted": rec.predicted_attainment,
                "simulated_admitted": simulated,
                "requests": n,
                "gap_points": gap,
                "disagrees": abs(gap) > DISAGREES_POINTS,
            }
        )
    return rows


def replica_breakdown(
    records: Sequence[SolveRecord],
    requests: Sequence[Request],
    classes: Mapping[str, RequestClass],
) -> list[dict[str, Any]]:
    """Per plan that was installed and per replica, over the requests it admitted in that span:
    the rate the route path sent there, the share that met its SLO, that missed its TTFT and
    its TPOT, and the mean prompt and output tokens — where the route path put the traffic
    against the plan's split, and which term missed."""
    table, admitted = _outcomes(requests, classes)
    replica = np.fromiter((r.replica for r in requests), np.int64, len(requests))
    cls = [classes.get(str(c)) for c in table.request_class]
    ttft_slo = np.asarray([c.ttft_slo_s if c else np.inf for c in cls])
    tpot_slo = np.asarray([c.tpot_slo_s if c else np.inf for c in cls])
    with np.errstate(invalid="ignore"):
        ttft_miss = ~(table.ttft <= ttft_slo)
        tpot_miss = table.tpot > tpot_slo
    rows = []
    for rec, lo, hi in installed(records):
        span = (table.arrival >= lo) & (table.arrival < hi) & admitted
        if not span.any():
            continue
        seconds = max(float(table.arrival[span].max() - table.arrival[span].min()), 1e-9)
        for r in np.unique(replica[span]).tolist():
            on = span & (replica == r)
            rows.append(
                {
                    "version": rec.version,
                    "replica": int(r),
                    "rps": float(on.sum() / seconds),
                    "met": float(table.met[on].mean()),
                    "ttft_missed": float(ttft_miss[on].mean()),
                    "tpot_missed": float(tpot_miss[on].mean()),
                    "prompt_tokens": float(table.input_tokens[on].mean()),
                    "output_tokens": float(table.output_tokens[on].mean()),
                }
            )
    return rows


def off_plan_share(
    records: Sequence[SolveRecord],
    requests: Sequence[Request],
    planned_rps: Mapping[int, Sequence[float]],
) -> list[tuple[int, float]]:
    """Per installed plan (by version): the share of the traffic it admitted that the route
    path sent elsewhere than the plan's split — half the L1 distance between the replicas'
    shares of the admitted requests in the span it served and of its ``planned_rps`` (per
    replica, in the simulator's replica order). 0: the route path followed the plan."""
    admitted = [r for r in requests if not refused(r) and r.replica >= 0]
    arrival = np.fromiter((r.arrival_s for r in admitted), np.float64, len(admitted))
    replica = np.fromiter((r.replica for r in admitted), np.int64, len(admitted))
    out = []
    for rec, lo, hi in installed(records):
        if rec.version is None or rec.version not in planned_rps:
            continue
        span = (arrival >= lo) & (arrival < hi)
        plan = np.asarray(planned_rps[rec.version], np.float64)
        if span.sum() < MIN_REQUESTS or plan.sum() <= 0:
            continue
        routed = np.bincount(replica[span], minlength=len(plan)).astype(np.float64)
        out.append(
            (rec.version, 0.5 * float(np.abs(routed / routed.sum() - plan / plan.sum()).sum()))
        )
    return out


def main(argv: Sequence[str]) -> None:
    """``python -m bench.loop.agreement WORKLOAD FLEET LOAD [--learn] [--no-gate] [--replicas]
    [--planned] [--engine-capacity] [--pooled | --per-replica]``: our loop (the full
    service, the route profile and gate at their defaults, not tuned; ``--no-gate``: without
    the admission gate) on the report part of the workload, and the agreement table of its plans
    (``--replicas``: and each plan's per-replica table; ``--planned``: and each plan at the
    load it planned for, :func:`at_planned_load`; ``--engine-capacity``: the plans' capacity
    at SLO from the engine's iteration times, :mod:`placement.solver.engine_capacity`; and,
    per plan, the share of its traffic the route path sent away from its split,
    :func:`off_plan_share`; ``--pooled`` / ``--per-replica``: the plans' predicted
    attainment from the pooled model (:mod:`placement.solver.pooled_attainment`; the default
    with the loop's scored route profile) or the per-replica one
    (:mod:`placement.solver.attainment`) — the plans and the simulation are the same, only
    the prediction differs)."""
    from bench.loop.cases import build_cases
    from bench.loop.run import (
        FULL,
        NO_ADMISSION,
        ours_fixed_plan,
        ours_with_policy,
        prepare,
    )
    from bench.loop.tuning import Setting
    from sim.capacity import rate_multiplier

    workload, fleet, load = argv[0], argv[1], float(argv[2])
    (case,) = build_cases(
        workloads=workload,
        fleets=fleet,
        loads=(load,),
        peers=("round_robin",),
        duration_s=None,
        period_s=120.0,
        learn="--learn" in argv,
        seed=0,
    )
    case = dataclasses.replace(case, settings=(Setting(1.0, 2.0, 1.0),))
    ctx = prepare(case, Path("out/agreement-store"), lambda _s: None)
    if "--engine-capacity" in argv:
        from placement.solver.capacity import class_slos
        from placement.solver.engine_capacity import EngineCapacity

        ctx.capacity = EngineCapacity(slos=class_slos(ctx.tune.classes))
    if "--pooled" in argv:
        ctx.attainment = "pooled"
    if "--per-replica" in argv:
        ctx.attainment = "replica"
    variant = NO_ADMISSION if "--no-gate" in argv else FULL
    planned = "--planned" in argv
    result, target, planning, _ = ours_with_policy(ctx, load, variant, keep_plans=True)
    print("plan at_s  predicted  plan-shed  simulated(admitted)  simulated(all)  refused  gap")
    for r in plan_agreement(planning.records, result.requests, target.classes):
        print(
            f"{r['version']!s:>4} {r['at_s']:6.1f}  {100 * r['predicted']:8.1f}%  "
            f"{100 * (r['plan_shed_share'] or 0):8.1f}%  {100 * r['simulated_admitted']:18.1f}%  "
            f"{100 * r['simulated_all']:13.1f}%  {100 * r['refused_share']:6.1f}%  "
            f"{r['gap_points']:+5.1f}{' !' if r['disagrees'] else ''}"
        )
    order = [r.id for r in case.fleet.replicas]
    split = {
        v: [next((r.planned_rps for r in p.replicas if r.id == i), 0.0) for i in order]
        for v, p in planning.plans.items()
    }
    print(
        "off-plan share (admitted traffic the route path sent elsewhere than the plan's split): "
        + ", ".join(
            f"plan {v} {100 * d:.0f}%"
            for v, d in off_plan_share(planning.records, result.requests, split)
        )
    )
    if "--replicas" in argv:
        print("plan replica  req/s   met  ttft-missed  tpot-missed  prompt  output")
        for b in replica_breakdown(planning.records, result.requests, target.classes):
            print(
                f"{b['version']!s:>4} {b['replica']:7d} {b['rps']:6.1f} {100 * b['met']:4.0f}% "
                f"{100 * b['ttft_missed']:10.0f}% {100 * b['tpot_missed']:11.0f}% "
                f"{b['prompt_tokens']:7.0f} {b['output_tokens']:7.0f}"
            )

    if planned:

        def simulate(
            rec: SolveRecord, on_head: bool
        ) -> tuple[Sequence[Request], Mapping[str, RequestClass]]:
            assert rec.version is not None
            plan = planning.plans[rec.version]
            res, wl = ours_fixed_plan(
                ctx, load, plan, planning, variant, on=ctx.tune if on_head else None
            )
            return res.requests, wl.classes

        # the period is in trace time (ours_with_policy): in simulated time at this load
        window_s = case.period_s / rate_multiplier(load, ctx.report, ctx.nominal_rps)
        print("at the planned load: plan at_s  predicted  simulated(admitted, own window)  gap")
        for r in at_planned_load(planning.records, window_s, simulate):
            print(
                f"{r['version']!s:>4} {r['at_s']:6.1f}  {100 * r['predicted']:8.1f}%  "
                f"{100 * r['simulated_admitted']:30.1f}%  "
                f"{r['gap_points']:+5.1f}{' !' if r['disagrees'] else ''}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
