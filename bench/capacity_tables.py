"""Capacity at SLO as the plan reads it, against what the simulator's engine sustains.

The plan splits demand over replicas by each kind's capacity at SLO (:mod:`models.capacity`:
the highest rate at which the predicted p95 TTFT and TPOT hold, from a latency model or the
roofline prior). This bench measures the same quantity on the engine itself: one replica of
the kind, a stream of identical requests (``prompt`` tokens, none cached, ``output`` tokens)
arriving as a Poisson process, simulated at a rate; the rate is feasible when the p95 of the
requests' TTFT and the p95 of their TPOT are within the SLO (the table's own criterion; a
request still unfinished when the stream has drained counts as missing both). The highest
feasible rate is found by bisection on common random numbers (one unit-rate arrival pattern,
compressed to each rate), so the search sees the rate, not a new draw.

    placement bench capacity [--fleet FILE] [--model URI] [--out FILE]

Rows: per replica kind of the fleet and request shape, the simulated capacity, the tables'
(the roofline prior's; the engine's, :mod:`placement.solver.engine_capacity`; and the latency
model ``--model``'s when given), and each ÷ simulated.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.policies import PolicyContext, make_policy
from models.capacity import Slo
from models.predictor import LatencyModel
from placement.domain.fleet import Fleet, ReplicaSpec
from placement.domain.requests import Request, RequestClass, Tenant
from placement.plan.capacity_source import ROOFLINE_SOURCE
from placement.report import print_table, write_json
from placement.solver.capacity import CapacitySource, TableCapacity
from placement.solver.engine_capacity import EngineCapacity
from sim.costmodel.factory import cost_model_for_replica
from sim.simulator import Simulator
from sim.workloads.base import Workload

# (prompt tokens, output tokens): short and long decodes, short and long prompts
SHAPES: tuple[tuple[int, int], ...] = ((300, 150), (750, 15), (750, 150), (2000, 150), (750, 400))
SLO = Slo(2.0, 0.1)  # the interactive class
REQUESTS = 2_000  # per simulated rate (600 overstated H100's capacity by 20%: not yet steady)
WARM_SHARE = 0.1  # the first requests of a run are not judged (the replica starts empty)
BISECTION_STEPS = 9
CLASS = "capacity-check"


@dataclass(frozen=True, slots=True)
class Judged:
    """One simulated rate: the p95s of the judged requests, and whether they hold the SLO."""

    rate: float
    ttft_p95_s: float
    tpot_p95_s: float
    feasible: bool


def unit_arrivals(n: int, seed: int) -> list[float]:
    """Arrival times of a unit-rate Poisson process (divide by a rate to get that rate)."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(1.0)
        out.append(t)
    return out


def shape_workload(
    spec: ReplicaSpec, prompt: int, output: int, rate: float, arrivals: Sequence[float], slo: Slo
) -> Workload:
    cls = RequestClass(
        name=CLASS,
        priority=0,
        ttft_slo_s=slo.ttft_p95_s,
        tpot_slo_s=slo.tpot_p95_s,
        sheddable=False,
    )
    requests = [
        Request(i, a / rate, prompt, output, tenant="t", request_class=CLASS, model=spec.model.name)
        for i, a in enumerate(arrivals)
    ]
    return Workload(
        name=f"{prompt}x{output}",
        requests=requests,
        tenants={"t": Tenant(name="t")},
        classes={CLASS: cls},
    )


def judge(
    spec: ReplicaSpec, prompt: int, output: int, rate: float, arrivals: Sequence[float], slo: Slo
) -> Judged:
    """Simulate one replica of ``spec`` at ``rate`` and judge the p95s against ``slo``."""
    fleet = Fleet(name="one", replicas=(spec,))
    wl = shape_workload(spec, prompt, output, rate, arrivals, slo)
    result = Simulator(
        fleet,
        make_policy("round_robin", PolicyContext(seed=0, block_tokens=wl.block_tokens)),
        wl,
        cost_model=cost_model_for_replica,
    ).run()
    judged = result.requests[int(len(result.requests) * WARM_SHARE) :]
    ttft = np.asarray(
        [r.first_token_s - r.arrival_s if r.first_token_s >= 0 else math.inf for r in judged]
    )
    tpot = np.asarray(
        [
            (r.finish_s - r.first_token_s) / max(r.output_tokens - 1, 1)
            if r.finish_s >= 0 and r.first_token_s >= 0
            else math.inf
            for r in judged
        ]
    )
    t95 = float(np.quantile(ttft, 0.95, method="higher"))
    d95 = float(np.quantile(tpot, 0.95, method="higher"))
    return Judged(rate, t95, d95, t95 <= slo.ttft_p95_s and d95 <= slo.tpot_p95_s)


def simulated_capacity(
    spec: ReplicaSpec,
    prompt: int,
    output: int,
    slo: Slo = SLO,
    *,
    requests: int = REQUESTS,
    steps: int = BISECTION_STEPS,
    seed: int = 0,
) -> float:
    """The highest rate (req/s) at which one replica of ``spec`` holds ``slo`` (0 if even a
    trickle does not): doubling to a bracket, then ``steps`` bisections."""
    arrivals = unit_arrivals(requests, seed)
    if not judge(spec, prompt, output, 0.01, arrivals, slo).feasible:
        return 0.0
    lo, hi = 0.01, 1.0
    while judge(spec, prompt, output, hi, arrivals, slo).feasible:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            return lo
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        if judge(spec, prompt, output, mid, arrivals, slo).feasible:
            lo = mid
        else:
            hi = mid
    return lo


def table_capacity(
    spec: ReplicaSpec, prompt: int, output: int, model: LatencyModel | None
) -> float:
    """The capacity table's lookup (``model`` None: the roofline prior) at SLO :data:`SLO`."""
    return _lookup(TableCapacity(model, ROOFLINE_SOURCE, slos=(SLO,)), spec, prompt, output)


def _lookup(source: CapacitySource, spec: ReplicaSpec, prompt: int, output: int) -> float:
    table = source.table(spec.accelerator.kind, spec.model.name, spec.tp)
    return table.lookup(prompt, output, table.slo_index(SLO))


def _median(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(values)) if values else None


def kinds(fleet: Fleet) -> list[ReplicaSpec]:
    """One replica of each (accelerator, model, TP) of ``fleet``, in fleet order."""
    seen: dict[tuple[str, str, int], ReplicaSpec] = {}
    for r in fleet.replicas:
        seen.setdefault((r.accelerator.kind, r.model.name, r.tp), r)
    return list(seen.values())


def run_capacity_bench(
    fleet: Fleet,
    *,
    model: LatencyModel | None = None,
    model_name: str = "",
    shapes: Sequence[tuple[int, int]] = SHAPES,
    out: Path | None = None,
    say: Any = print,
) -> dict[str, Any]:
    # each source builds a kind's table once, on its first lookup
    sources: dict[str, CapacitySource] = {
        "roofline": TableCapacity(None, ROOFLINE_SOURCE, slos=(SLO,)),
        "engine": EngineCapacity(slos=(SLO,)),
    }
    if model is not None:
        sources["model"] = TableCapacity(model, model_name, slos=(SLO,))
    rows: list[dict[str, Any]] = []
    for spec in kinds(fleet):
        for prompt, output in shapes:
            say(f"{spec.accelerator.kind} {spec.model.name} TP{spec.tp}: {prompt} x {output}")
            sim = simulated_capacity(spec, prompt, output)
            row: dict[str, Any] = {
                "accelerator": spec.accelerator.kind,
                "model": spec.model.name,
                "tp": spec.tp,
                "prompt": prompt,
                "output": output,
                "simulated_rps": sim,
            }
            for name, source in sources.items():
                rate = _lookup(source, spec, prompt, output)
                row[f"{name}_rps"] = rate
                row[f"{name}_vs_simulated"] = rate / sim if sim > 0 else None
            rows.append(row)
    summary: dict[str, Any] = {
        "slo": {"ttft_p95_s": SLO.ttft_p95_s, "tpot_p95_s": SLO.tpot_p95_s},
        **{
            f"{name}_vs_simulated_median": _median(rows, f"{name}_vs_simulated") for name in sources
        },
        "model": model_name or None,
    }
    columns = ["accelerator", "prompt", "output", "simulated_rps"]
    columns += [f"{name}{column}" for name in sources for column in ("_rps", "_vs_simulated")]
    print_table(
        f"capacity at SLO (p95 TTFT {SLO.ttft_p95_s} s, TPOT {SLO.tpot_p95_s} s)", rows, columns
    )
    payload = {"rows": rows, "summary": summary}
    if out is not None:
        write_json(out, payload)
    return payload
