"""What one simulated run achieved: latency percentiles, SLO attainment, goodput, fairness, cost.

Definitions (each request judged against its own class's SLOs):
- TTFT = first token − arrival; TPOT = (finish − first token) / (output tokens − 1);
  end-to-end = finish − arrival. A failed or unfinished request misses every SLO.
- SLO attainment = share of requests with TTFT ≤ the class's TTFT SLO and TPOT ≤ its TPOT SLO.
- Goodput = requests meeting their SLOs per second of the arrival window.
- Prefix hit rate = prompt tokens served from the prefix cache / prompt tokens.
- Jain's index over tenants of goodput divided by the tenant's credit share.
- Cost per million output tokens = fleet cost over the run / output tokens delivered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from placement.domain.requests import Request, RequestClass
from sim.simulator import SimResult
from sim.workloads.base import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTable:
    """Per-request outcomes as columns (NaN where a value does not exist)."""

    ttft: NDArray[np.float64]
    tpot: NDArray[np.float64]
    e2e: NDArray[np.float64]
    met: NDArray[np.bool_]
    completed: NDArray[np.bool_]
    failed: NDArray[np.bool_]
    input_tokens: NDArray[np.int64]
    cached_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    tenant: NDArray[np.str_]
    request_class: NDArray[np.str_]
    arrival: NDArray[np.float64]


def request_table(requests: list[Request], classes: dict[str, RequestClass]) -> RequestTable:
    n = len(requests)
    arrival = np.fromiter((r.arrival_s for r in requests), float, n)
    first = np.fromiter((r.first_token_s for r in requests), float, n)
    finish = np.fromiter((r.finish_s for r in requests), float, n)
    out = np.fromiter((r.output_tokens for r in requests), np.int64, n)
    failed = np.fromiter((bool(r.error) for r in requests), bool, n)
    completed = (finish >= 0) & ~failed
    ttft = np.where(completed, first - arrival, np.nan)
    tpot = np.where(completed & (out > 1), (finish - first) / np.maximum(out - 1, 1), np.nan)
    tpot = np.where(completed & (out <= 1), 0.0, tpot)
    e2e = np.where(completed, finish - arrival, np.nan)
    cls = np.array([r.request_class for r in requests], dtype=str)
    ttft_slo = np.empty(n)
    tpot_slo = np.empty(n)
    for name in np.unique(cls):
        c = classes.get(str(name))
        mask = cls == name
        ttft_slo[mask] = c.ttft_slo_s if c else np.inf
        tpot_slo[mask] = c.tpot_slo_s if c else np.inf
    with np.errstate(invalid="ignore"):
        met = completed & (ttft <= ttft_slo) & (tpot <= tpot_slo)
    return RequestTable(
        ttft=ttft,
        tpot=tpot,
        e2e=e2e,
        met=met,
        completed=completed,
        failed=failed,
        input_tokens=np.fromiter((r.input_tokens for r in requests), np.int64, n),
        cached_tokens=np.fromiter((r.cached_tokens for r in requests), np.int64, n),
        output_tokens=out,
        tenant=np.array([r.tenant for r in requests], dtype=str),
        request_class=cls,
        arrival=arrival,
    )


def _pct(x: NDArray[np.float64], q: float) -> float:
    x = x[~np.isnan(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def jain_index(values: list[float]) -> float:
    """(Σx)² / (n·Σx²): 1 when all equal, 1/n when one takes everything."""
    if not values:
        return float("nan")
    s = sum(values)
    sq = sum(v * v for v in values)
    return (s * s) / (len(values) * sq) if sq > 0 else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMetrics:
    policy: str
    workload: str
    fleet: str
    requests: int
    completed: int
    failed: int
    unfinished: int
    window_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p95_s: float
    tpot_p99_s: float
    e2e_p50_s: float
    e2e_p99_s: float
    slo_attainment: float
    attainment_by_class: dict[str, float]
    goodput_rps: float
    goodput_by_tenant: dict[str, float]
    prefix_hit_rate: float
    jain: float
    output_tps: float
    cost_per_m_output_tokens: float
    utilisation: float
    utilisation_by_replica: dict[str, float]
    preemptions: int
    refused: int
    retries: int

    def as_row(self) -> dict[str, object]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def summarise(result: SimResult, workload: Workload) -> RunMetrics:
    """Reduce a simulated run to the figures a benchmark reports."""
    t = request_table(result.requests, workload.classes)
    n = len(result.requests)
    window = max(float(t.arrival.max() - t.arrival.min()), 1e-9) if n else 1e-9
    by_class = {
        str(c): float(t.met[t.request_class == c].mean()) for c in np.unique(t.request_class)
    }
    tenants = sorted(set(t.tenant.tolist()))
    goodput_by_tenant = {k: float(t.met[t.tenant == k].sum()) / window for k in tenants}
    shares = {
        k: (workload.tenants[k].credit_share if k in workload.tenants else 1.0) for k in tenants
    }
    jain = jain_index([goodput_by_tenant[k] / max(shares[k], 1e-12) for k in tenants])
    out_tokens = int(t.output_tokens[t.completed].sum())
    hours = max(result.end_s, 1e-9) / 3600
    cost = result.fleet.cost_per_hour * hours
    util = {s.id: s.busy_s / max(result.end_s, 1e-9) for s in result.replicas}
    prompt = int(t.input_tokens.sum())
    return RunMetrics(
        policy=result.policy,
        workload=result.workload,
        fleet=result.fleet.name,
        requests=n,
        completed=int(t.completed.sum()),
        failed=int(t.failed.sum()),
        unfinished=int((~t.completed & ~t.failed).sum()),
        window_s=window,
        ttft_p50_s=_pct(t.ttft, 50),
        ttft_p95_s=_pct(t.ttft, 95),
        ttft_p99_s=_pct(t.ttft, 99),
        tpot_p50_s=_pct(t.tpot, 50),
        tpot_p95_s=_pct(t.tpot, 95),
        tpot_p99_s=_pct(t.tpot, 99),
        e2e_p50_s=_pct(t.e2e, 50),
        e2e_p99_s=_pct(t.e2e, 99),
        slo_attainment=float(t.met.mean()) if n else float("nan"),
        attainment_by_class=by_class,
        goodput_rps=float(t.met.sum()) / window,
        goodput_by_tenant=goodput_by_tenant,
        prefix_hit_rate=float(t.cached_tokens.sum()) / prompt if prompt else 0.0,
        jain=jain,
        output_tps=out_tokens / max(result.end_s, 1e-9),
        cost_per_m_output_tokens=cost / (out_tokens / 1e6) if out_tokens else float("inf"),
        utilisation=float(np.mean(list(util.values()))) if util else 0.0,
        utilisation_by_replica=util,
        preemptions=sum(s.preemptions for s in result.replicas),
        refused=result.refused,
        retries=result.retries,
    )
