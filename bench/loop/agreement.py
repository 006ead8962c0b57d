"""The loop's plans against the simulator: each plan's predicted attainment (of the traffic it
admits) beside the attainment the simulator measured while that plan was installed.

A plan serves from its solve to the next one (the first, solved from the head, from the start
of the run). Simulated attainment is of the requests that arrived in that span and were
admitted (the gate's refusals are not counted; a refused request is not one the plan's
prediction covers), and of all of them. Issue 14 §6 asks the two to agree within 5 points.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.loop.plans import SolveRecord
from placement.domain.requests import Request, RequestClass
from sim.metrics import request_table

MIN_REQUESTS = 50  # a plan that served fewer is not compared
DISAGREES_POINTS = 5.0


def refused(req: Request) -> bool:
    """Refused by the gate (an error that is not a lost request)."""
    return bool(req.error) and not req.error.startswith("lost")


def plan_agreement(
    records: Sequence[SolveRecord],
    requests: Sequence[Request],
    classes: Mapping[str, RequestClass],
) -> list[dict[str, Any]]:
    """Per plan that was installed (a record with a prediction): its prediction, what the
    simulator measured over the span it served, and the gap in points."""
    table = request_table(list(requests), dict(classes))
    out_refused = np.fromiter((refused(r) for r in requests), np.bool_, len(requests))
    kept = [r for r in records if r.predicted_attainment is not None]
    rows = []
    for i, rec in enumerate(kept):
        lo = rec.at_s if i > 0 else -np.inf
        hi = kept[i + 1].at_s if i + 1 < len(kept) else np.inf
        span = (table.arrival >= lo) & (table.arrival < hi)
        admitted = span & ~out_refused
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


def replica_breakdown(
    records: Sequence[SolveRecord],
    requests: Sequence[Request],
    classes: Mapping[str, RequestClass],
) -> list[dict[str, Any]]:
    """Per plan that was installed and per replica, over the requests it admitted in that span:
    the rate the route path sent there, the share that met its SLO, that missed its TTFT and
    its TPOT, and the mean prompt and output tokens — where the route path put the traffic
    against the plan's split, and which term missed."""
    table = request_table(list(requests), dict(classes))
    admitted = ~np.fromiter((refused(r) for r in requests), np.bool_, len(requests))
    replica = np.fromiter((r.replica for r in requests), np.int64, len(requests))
    cls = [classes.get(str(c)) for c in table.request_class]
    ttft_slo = np.asarray([c.ttft_slo_s if c else np.inf for c in cls])
    tpot_slo = np.asarray([c.tpot_slo_s if c else np.inf for c in cls])
    with np.errstate(invalid="ignore"):
        ttft_miss = ~(table.ttft <= ttft_slo)
        tpot_miss = table.tpot > tpot_slo
    kept = [r for r in records if r.predicted_attainment is not None]
    rows = []
    for i, rec in enumerate(kept):
        lo = rec.at_s if i > 0 else -np.inf
        hi = kept[i + 1].at_s if i + 1 < len(kept) else np.inf
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


def main(argv: Sequence[str]) -> None:
    """``python -m bench.loop.agreement WORKLOAD FLEET LOAD [--learn] [--no-gate]
    [--replicas]``: our loop (the full service, the route profile and gate at their defaults,
    not tuned; ``--no-gate``: without the admission gate) on the report part of the workload,
    and the agreement table of its plans (``--replicas``: and each plan's per-replica table)."""
    from bench.loop.cases import build_cases
    from bench.loop.run import FULL, NO_ADMISSION, ours_with_policy, prepare
    from bench.loop.tuning import Setting

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
    variant = NO_ADMISSION if "--no-gate" in argv else FULL
    result, target, planning, _ = ours_with_policy(ctx, load, variant)
    print("plan at_s  predicted  plan-shed  simulated(admitted)  simulated(all)  refused  gap")
    for r in plan_agreement(planning.records, result.requests, target.classes):
        print(
            f"{r['version']!s:>4} {r['at_s']:6.1f}  {100 * r['predicted']:8.1f}%  "
            f"{100 * (r['plan_shed_share'] or 0):8.1f}%  {100 * r['simulated_admitted']:18.1f}%  "
            f"{100 * r['simulated_all']:13.1f}%  {100 * r['refused_share']:6.1f}%  "
            f"{r['gap_points']:+5.1f}{' !' if r['disagrees'] else ''}"
        )
    if "--replicas" in argv:
        print("plan replica  req/s   met  ttft-missed  tpot-missed  prompt  output")
        for b in replica_breakdown(planning.records, result.requests, target.classes):
            print(
                f"{b['version']!s:>4} {b['replica']:7d} {b['rps']:6.1f} {100 * b['met']:4.0f}% "
                f"{100 * b['ttft_missed']:10.0f}% {100 * b['tpot_missed']:11.0f}% "
                f"{b['prompt_tokens']:7.0f} {b['output_tokens']:7.0f}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
