"""Greedy client: one tenant takes route decisions and never reports their outcomes.

The fleet simulator runs the service's own admission, leases and route path
(:class:`serving.service.PlacementService` on the simulator's clock, no plan: the greedy
fallback) in front of a real fleet. Three tenants share it:

- ``steady``: a real trace (Azure conversations) at ``load`` × the fleet's nominal capacity,
  declared with credit share ``steady_share``; its router reports every outcome;
- ``greedy``: a burst of ``burst`` requests at ``burst_at_s``, then ``greedy_rps`` requests/s to
  the end; its router reports **no** outcome (its requests run, their leases are never settled);
- ``newcomer``: a tenant never seen before, ``newcomer_rps`` requests/s from ``newcomer_at_s``.

Each is run four times: ``fixed-lease`` (every lease 300 s, no bound per tenant: the service
before issue 19), ``predicted-lease`` (leases by predicted completion alone), ``bound-only``
(in-flight entitlements by credit share alone, 300 s leases) and ``entitled`` (both: the service
now). Reported per tenant: requests, share admitted, SLO attainment (share
of all its requests served within their class's TTFT and TPOT SLOs; refusals count as misses),
and for ``steady`` the same after the burst.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placement.domain.fleet import Fleet, load_fleet
from placement.domain.requests import Request, Tenant
from placement.errors import PlacementError
from placement.paths import repo_root
from placement.report import print_table, write_json
from serving.admission import AdmissionController, class_budgets
from serving.leases import LeaseTerms
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery
from serving.service import DEFAULT_IN_FLIGHT_PER_REPLICA, PlacementService, UnknownDecision
from sim.capacity import fleet_capacity, rate_multiplier
from sim.costmodel.factory import cost_model_for_replica
from sim.metrics import request_table
from sim.router import ReplicaView
from sim.simulator import SimConfig, Simulator
from sim.workloads.assemble import merge
from sim.workloads.base import Workload
from sim.workloads.registry import load_workload

STEADY, GREEDY, NEWCOMER = "steady", "greedy", "newcomer"
# mode → (leases by predicted completion, in-flight bounded per tenant)
MODES: dict[str, tuple[bool, bool]] = {
    "fixed-lease": (False, False),
    "predicted-lease": (True, False),
    "bound-only": (False, True),
    "entitled": (True, True),
}
FIXED_LEASE_S = 300.0
TABLE_COLUMNS = (
    "mode",
    "tenant",
    "requests",
    "admitted",
    "attainment",
    "after_burst_admitted",
    "after_burst_attainment",
    "late_outcomes",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GreedyBench:
    fleet: Fleet
    duration_s: float = 200.0  # the Azure hour at load 0.4 of 8 H100s lasts 283 s
    load: float = 0.4
    steady_share: float = 0.6
    burst: int = 600
    burst_at_s: float = 30.0
    greedy_rps: float = 20.0
    greedy_input_tokens: int = 512
    greedy_output_tokens: int = 128
    newcomer_at_s: float = 90.0
    newcomer_rps: float = 2.0
    seed: int = 0

    @staticmethod
    def default() -> GreedyBench:
        return GreedyBench(fleet=load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml"))


class ServicePolicy:
    """The simulator's routing policy contract over a :class:`PlacementService`: decisions
    through the service (admission, leases, route path) at the simulator's time; outcomes
    reported back except for ``silent`` tenants."""

    name = "service"

    def __init__(
        self, service: PlacementService, *, silent: frozenset[str], default_model: str
    ) -> None:
        self.service = service
        self.silent = silent
        self.default_model = default_model
        self.now = 0.0
        self.late = dict.fromkeys((STEADY, GREEDY, NEWCOMER), 0)  # outcomes after expiry
        self._decisions: dict[int, str] = {}
        self._index: dict[str, int] = {}

    def clock(self) -> float:
        return self.now

    def _sync(self, replicas: list[ReplicaView] | tuple[ReplicaView, ...]) -> None:
        if not self._index:
            self._index = {v.id: v.index for v in replicas}
        for v in replicas:
            state = self.service.replicas[v.id]
            state.healthy = v.healthy
            if v.scraped_at_s != state.scraped_at:
                state.scraped_at = v.scraped_at_s
                state.num_requests_running = v.num_running
                state.num_requests_waiting = v.num_waiting
                state.kv_cache_usage_perc = v.kv_usage

    def route(self, req: Request, replicas: Any, now: float) -> int:
        self.now = now
        self._sync(replicas)
        query = RouteQuery(
            tenant=req.tenant,
            model=req.model or self.default_model,
            request_class=req.request_class,
            block_hashes=req.block_hashes,
            input_tokens=req.input_tokens,
            max_output_tokens=req.output_tokens,
        )
        try:
            routed = self.service.route(query)
        except PlacementError:  # refused (429) or nothing can serve (503)
            return -1
        self._decisions[req.id] = routed.decision_id
        return self._index[routed.decision.replica_id]

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.now = now
        decision = self._decisions.get(req.id)
        if decision is not None and req.tenant not in self.silent:
            with contextlib.suppress(UnknownDecision):  # expired: the outcome will say so
                self.service.first_token(decision)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.now = now
        decision = self._decisions.pop(req.id, None)
        if decision is None or req.tenant in self.silent:
            return
        try:
            self.service.complete(decision, output_tokens=req.output_tokens, ok=not req.error)
        except UnknownDecision:
            self.late[req.tenant] = self.late.get(req.tenant, 0) + 1


def build_workload(bench: GreedyBench) -> Workload:
    """The three tenants' requests merged by arrival (see the module docstring)."""
    trace = load_workload("azure-conv", seed=bench.seed)  # the whole hour, compressed
    capacity = sum(fleet_capacity(bench.fleet, trace, cost_model_for_replica))
    steady = trace.scaled(rate_multiplier(bench.load, trace, capacity))
    steady = steady.window(0.0, bench.duration_s)
    for r in steady.requests:
        r.tenant = STEADY
    rng = random.Random(bench.seed)
    arrivals = [bench.burst_at_s + i * 1e-3 for i in range(bench.burst)]
    t = bench.burst_at_s + bench.burst * 1e-3
    while t < bench.duration_s:
        arrivals.append(t)
        t += rng.expovariate(bench.greedy_rps)
    greedy = _synthetic(
        GREEDY, arrivals, bench.greedy_input_tokens, bench.greedy_output_tokens, rng, steady
    )
    arrivals, t = [], bench.newcomer_at_s
    while t < bench.duration_s:
        arrivals.append(t)
        t += rng.expovariate(bench.newcomer_rps)
    newcomer = _synthetic(NEWCOMER, arrivals, 512, 128, rng, steady)
    tenants = {
        STEADY: Tenant(name=STEADY, credit_share=bench.steady_share),
        GREEDY: Tenant(name=GREEDY, credit_share=0.0),
        NEWCOMER: Tenant(name=NEWCOMER, credit_share=0.0),
    }
    return merge("greedy-client", [steady, greedy, newcomer], tenants)


def _synthetic(
    tenant: str,
    arrivals: list[float],
    input_tokens: int,
    output_tokens: int,
    rng: random.Random,
    like: Workload,
) -> Workload:
    blocks = max(1, input_tokens // like.block_tokens)
    requests = [
        Request(
            i,
            t,
            input_tokens,
            output_tokens,
            tenant=tenant,
            block_hashes=tuple(rng.getrandbits(62) for _ in range(blocks)),
            block_tokens=like.block_tokens,
        )
        for i, t in enumerate(arrivals)
    ]
    return Workload(
        name=tenant,
        requests=requests,
        tenants={},
        classes=like.classes,
        block_tokens=like.block_tokens,
    )


def make_service(bench: GreedyBench, mode: str, policy_clock: Any) -> PlacementService:
    predicted, bounded = MODES[mode]
    per_replica = DEFAULT_IN_FLIGHT_PER_REPLICA
    admission = AdmissionController(
        classes=class_budgets(fleet_in_flight=per_replica),
        fleet_in_flight=per_replica,
        bound_tenants=bounded,
    )
    terms = (
        LeaseTerms()
        if predicted
        else LeaseTerms(margin=1.0, floor_s=FIXED_LEASE_S, ceiling_s=FIXED_LEASE_S)
    )
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values())),
        admission=admission,
        lease_terms=terms,
        tenants={STEADY: Tenant(name=STEADY, credit_share=bench.steady_share)},
        in_flight_per_replica=per_replica,
        clock=policy_clock,
    )
    for spec in bench.fleet.replicas:
        service.register_replica(
            ReplicaState(
                id=spec.id,
                address=spec.id,
                model=spec.model.name,
                accelerator=spec.accelerator.kind,
                tp=spec.tp,
                kv_capacity_tokens=spec.kv_capacity_tokens,
            )
        )
    return service


def run_mode(bench: GreedyBench, workload: Workload, mode: str) -> list[dict[str, Any]]:
    """One simulated run in ``mode``: a row per tenant."""
    holder: list[ServicePolicy] = []
    service = make_service(bench, mode, lambda: holder[0].now)
    policy = ServicePolicy(
        service, silent=frozenset({GREEDY}), default_model=bench.fleet.replicas[0].model.name
    )
    holder.append(policy)
    wl = Workload(
        name=workload.name,
        requests=[r.unserved() for r in workload.requests],
        tenants=workload.tenants,
        classes=workload.classes,
        block_tokens=workload.block_tokens,
    )
    result = Simulator(
        bench.fleet, policy, wl, cost_model=cost_model_for_replica, config=SimConfig()
    ).run()
    table = request_table(result.requests, workload.classes)
    refused = np.asarray([r.error.startswith("refused") for r in result.requests])
    after = table.arrival >= bench.burst_at_s
    rows = []
    for tenant in (STEADY, GREEDY, NEWCOMER):
        mine = table.tenant == tenant
        late = mine & after
        rows.append(
            {
                "mode": mode,
                "tenant": tenant,
                "requests": int(mine.sum()),
                "admitted": _share(~refused, mine),
                "attainment": _share(table.met, mine),
                "after_burst_admitted": _share(~refused, late),
                "after_burst_attainment": _share(table.met, late),
                "late_outcomes": policy.late.get(tenant, 0),
            }
        )
    return rows


def _share(flags: np.ndarray, mask: np.ndarray) -> float:
    n = int(mask.sum())
    return float(flags[mask].sum()) / n if n else float("nan")


def run_greedy_client_bench(bench: GreedyBench, *, out: Path | None) -> dict[str, Any]:
    workload = build_workload(bench)
    rows = [row for mode in MODES for row in run_mode(bench, workload, mode)]
    payload: dict[str, Any] = {
        "fleet": bench.fleet.name,
        "in_flight_budget": len(bench.fleet.replicas) * DEFAULT_IN_FLIGHT_PER_REPLICA,
        "settings": {
            "duration_s": bench.duration_s,
            "load": bench.load,
            "steady_share": bench.steady_share,
            "burst": bench.burst,
            "burst_at_s": bench.burst_at_s,
            "greedy_rps": bench.greedy_rps,
            "newcomer_at_s": bench.newcomer_at_s,
            "newcomer_rps": bench.newcomer_rps,
            "seed": bench.seed,
        },
        "runs": rows,
    }
    print_table(
        f"greedy client on {bench.fleet.name}: {bench.burst} unreported decisions at "
        f"{bench.burst_at_s:g} s, then {bench.greedy_rps:g}/s (steady: load {bench.load:g}, "
        f"credit {bench.steady_share:g})",
        rows,
        TABLE_COLUMNS,
    )
    if out is not None:
        write_json(out, payload)
    return payload
