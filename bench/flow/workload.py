"""The traffic of the flow-control experiments.

- **Interactive**: the Mooncake conversation trace (real arrivals, real prefix sharing) at a
  load, each request given a tenant (demand 0.6 / 0.3 / 0.1 against credits 0.5 / 0.3 / 0.2,
  so one tenant asks for more than its share) and a band: ``premium`` (band 0, 30% of
  requests) or ``standard`` (band 1); both interactive SLOs (TTFT 2 s / 3 s, TPOT 100 ms).
- **Batch**: a backlog the size of one hour of the interactive traffic, all submitted at the
  start, class ``batch`` (lowest band, a 24 h window), lengths and prefixes drawn from the trace.
- **Diurnal**: a day whose interactive arrival rate follows the shipped ServeGen ``language/
  m-small`` population (the sum of its 43 clients' rates, 600 s windows, day 0) scaled so its
  peak is ``peak_load`` × the fleet's capacity; requests drawn from the Mooncake trace.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from placement.domain.fleet import Fleet
from placement.domain.requests import Request, RequestClass, Tenant
from sim.capacity import fleet_capacity
from sim.costmodel.factory import cost_model_for_replica
from sim.workloads.base import Workload
from sim.workloads.mooncake import load_mooncake
from sim.workloads.servegen import servegen_client_rates

PREMIUM = RequestClass(name="premium", priority=0, ttft_slo_s=2.0, tpot_slo_s=0.1, sheddable=False)
STANDARD = RequestClass(name="standard", priority=1, ttft_slo_s=3.0, tpot_slo_s=0.1, sheddable=True)
BATCH_CLASS = RequestClass(
    name="batch", priority=2, ttft_slo_s=24 * 3600.0, tpot_slo_s=10.0, sheddable=True
)
CLASSES = {c.name: c for c in (PREMIUM, STANDARD, BATCH_CLASS)}
TENANTS = {
    "acme": Tenant(name="acme", credit_share=0.5),
    "globex": Tenant(name="globex", credit_share=0.3),
    "initech": Tenant(name="initech", credit_share=0.2),
}
DEMAND = {"acme": 0.6, "globex": 0.3, "initech": 0.1}
PREMIUM_SHARE = 0.3
DAY_S = 24 * 3600.0
WINDOW_S = 600.0


@dataclass(frozen=True, slots=True)
class Traffic:
    workload: Workload
    capacity_rps: float  # the fleet's nominal capacity for the trace's mean request
    interactive: int
    batch: int


def capacity_rps(fleet: Fleet) -> float:
    return sum(fleet_capacity(fleet, load_mooncake(), cost_model_for_replica))


def _label(reqs: list[Request], seed: int) -> None:
    rng = random.Random(seed)
    names, weights = list(DEMAND), list(DEMAND.values())
    for r in reqs:
        r.tenant = rng.choices(names, weights)[0]
        r.request_class = PREMIUM.name if rng.random() < PREMIUM_SHARE else STANDARD.name


def _batch(pool: list[Request], count: int, first_id: int, seed: int) -> list[Request]:
    rng = random.Random(seed + 1)
    names, weights = list(DEMAND), list(DEMAND.values())
    out = []
    for k in range(count):
        src = rng.choice(pool)
        r = src.unserved(arrival_s=0.0)
        r.id = first_id + k
        r.tenant = rng.choices(names, weights)[0]
        r.request_class = BATCH_CLASS.name
        out.append(r)
    return out


def _workload(name: str, reqs: list[Request]) -> Workload:
    reqs.sort(key=lambda r: (r.arrival_s, r.id))
    return Workload(name=name, requests=reqs, tenants=dict(TENANTS), classes=dict(CLASSES))


def overload(
    fleet: Fleet, load: float, *, start: float, end: float, backlog_s: float, seed: int
) -> Traffic:
    """The Mooncake trace at ``load``, the part of it in [start, end) of its span (shares of
    it: the head to tune on, the tail to report on), plus a batch backlog of ``backlog_s``
    seconds of that traffic at the start."""
    base = load_mooncake()
    cap = capacity_rps(fleet)
    rate = load * cap / (len(base.requests) / base.duration_s)
    scaled = base.scaled(rate)
    span = scaled.duration_s
    part = scaled.window(start * span, end * span)
    reqs = list(part.requests)
    _label(reqs, seed)
    backlog = round(load * cap * backlog_s)
    reqs += _batch(reqs, backlog, 10_000_000, seed)
    return Traffic(_workload(f"mooncake@{load:g}", reqs), cap, len(part.requests), backlog)


def diurnal_shape(day: int = 0) -> list[float]:
    """The ServeGen population's total rate per 600 s window of ``day``, over its peak."""
    n = int(DAY_S // WINDOW_S)
    total = [
        sum(servegen_client_rates(duration_s=WINDOW_S, start_s=day * DAY_S + k * WINDOW_S).values())
        for k in range(n)
    ]
    peak = max(total)
    return [t / peak for t in total]


def diurnal(
    fleet: Fleet, peak_load: float, *, backlog_s: float, seed: int, day_s: float = DAY_S
) -> Traffic:
    """A day of interactive traffic following the diurnal shape (peak at ``peak_load``) plus
    a batch backlog of ``backlog_s`` seconds of the day's mean traffic at the start; ``day_s``
    shorter than a day compresses the shape into it (a quick check)."""
    pool = load_mooncake().requests
    cap = capacity_rps(fleet)
    shape = diurnal_shape()
    window = day_s / len(shape)
    rng = random.Random(seed)
    reqs: list[Request] = []
    t = 0.0
    for k, level in enumerate(shape):
        rate = peak_load * cap * level
        end = (k + 1) * window
        if rate <= 0:
            t = end
            continue
        while True:
            t += -math.log(1.0 - rng.random()) / rate
            if t >= end:
                t = end
                break
            r = rng.choice(pool).unserved(arrival_s=t)
            r.id = len(reqs)
            reqs.append(r)
    _label(reqs, seed)
    mean_rps = len(reqs) / day_s
    backlog = round(mean_rps * backlog_s)
    interactive = len(reqs)
    reqs += _batch(pool, backlog, 10_000_000, seed)
    return Traffic(_workload(f"diurnal@{peak_load:g}", reqs), cap, interactive, backlog)
