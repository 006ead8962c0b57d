"""Route path speed: in-process decision latency and batch throughput on a synthetic plan.

The instance: ``replicas`` replicas in four model pools, ``groups`` prefix groups (one to
three weighted primaries and two secondaries each), a default route for three tenants in four,
and live state with a few replicas down, stale or over their cap. Queries mix, by default,
60 % prefixes of a planned group (with more blocks after it), 30 % tenants' unplanned prefixes
with a default, and 10 % prefixes of tenants with no default (the unseen-prefix fallback).

``in_process_p99_us`` times each :meth:`decide` alone (``perf_counter_ns`` around the call,
median of the per-repeat p99s); ``batch_decisions_per_s`` is :meth:`decide_batch` over all
queries (median over repeats). ``http_rps``, ``http_p99_ms`` and ``http_cpu_us_per_decision``
(server CPU per decision) come from :func:`measure_http`: wrk at ``http_rate`` req/s against the
service's server stack (targets at 2,000 req/s: p99 ≤ 1 ms, ≤ 120 µs of CPU per decision).
Prompts are capped at :data:`MAX_PROMPT_TOKENS` so that every request fits the smallest context
window of the four models with its output (otherwise the service refuses it, 422).
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.domain.prefix import chain_block_ids
from placement.plan import (
    DefaultRoute,
    Plan,
    PrefixGroupRoute,
    ReplicaPlan,
    Route,
    SolverReport,
)
from placement.report import print_table, write_json
from serving.route import NoReplica, PlacementRoutePath, ReplicaState, RouteQuery, load_profile

MODELS = ("llama-3-8b", "qwen2.5-32b", "mixtral-8x7b", "llama-2-70b")
ACCELERATOR = "H100-SXM"
TP = {"llama-3-8b": 1, "qwen2.5-32b": 2, "mixtral-8x7b": 2, "llama-2-70b": 4}
GROUP_SHARE = 0.6
DEFAULT_SHARE = 0.3  # the rest: unseen prefixes with no default
DOWN_SHARE = 0.01
STALE_SHARE = 0.01
OVER_CAP_SHARE = 0.02
NOW = 1_000.0
MAX_PROMPT_TOKENS = 3_584  # llama-2-70b's 4,096-token window less 256 output and some slack


@dataclass(frozen=True, slots=True)
class RouteInstance:
    states: list[ReplicaState]
    plan: Plan
    queries: list[RouteQuery]


def _route(rng: random.Random, pool: list[str], primaries: int, secondaries: int) -> Route:
    picked = rng.sample(pool, primaries + secondaries)
    raw = [rng.uniform(0.2, 1.0) for _ in range(primaries)]
    total = sum(raw)
    weights = [w / total for w in raw[:-1]]
    weights.append(1.0 - sum(weights))
    return Route(
        replicas=tuple(picked[:primaries]),
        weights=tuple(weights),
        secondary=tuple(picked[primaries:]),
    )


def synthetic_instance(
    *, replicas: int, groups: int, queries: int, tenants: int = 32, seed: int = 0
) -> RouteInstance:
    """A plan, live states and a query mix (see the module docstring)."""
    rng = random.Random(seed)
    states: list[ReplicaState] = []
    pools: dict[str, list[str]] = {m: [] for m in MODELS}
    for i in range(replicas):
        model = MODELS[i % len(MODELS)]
        rid = f"r{i:04d}"
        pools[model].append(rid)
        states.append(
            ReplicaState(
                id=rid,
                address=f"10.0.{i // 256}.{i % 256}:8000",
                model=model,
                accelerator=ACCELERATOR,
                tp=TP[model],
                kv_capacity_tokens=400_000,
                in_flight=rng.randrange(0, 20),
                in_flight_prefill_tokens=rng.randrange(0, 8_000),
                num_requests_running=rng.uniform(0, 30),
                num_requests_waiting=rng.choice((0.0, 0.0, 0.0, 1.0, 2.0)),
                kv_cache_usage_perc=rng.uniform(0, 0.9),
                scraped_at=NOW - rng.uniform(0, 1.0),
            )
        )
    for s in states:
        u = rng.random()
        if u < DOWN_SHARE:
            s.healthy = False
        elif u < DOWN_SHARE + STALE_SHARE:
            s.scraped_at = NOW - 60.0
        elif u < DOWN_SHARE + STALE_SHARE + OVER_CAP_SHARE:
            s.in_flight = 10_000
    tenant_names = [f"t{t:02d}" for t in range(tenants)]
    with_default = tenant_names[: tenants * 3 // 4]
    group_chains: list[tuple[str, str, tuple[int, ...]]] = []
    plan_groups: list[PrefixGroupRoute] = []
    for _ in range(groups):
        tenant = rng.choice(tenant_names)
        model = rng.choice(MODELS)
        depth = rng.randint(1, 8)
        chain = chain_block_ids(rng.getrandbits(62) for _ in range(depth))
        group_chains.append((tenant, model, chain))
        plan_groups.append(
            PrefixGroupRoute(
                key=chain[-1],
                depth_blocks=depth,
                tenant=tenant,
                model=model,
                rate_rps=1.0,
                prefix_tokens=depth * 512,
                route=_route(rng, pools[model], rng.randint(1, 3), 2),
            )
        )
    defaults = [
        DefaultRoute(tenant=t, model=m, route=_route(rng, pools[m], 4, 0))
        for t in with_default
        for m in MODELS
    ]
    plan = Plan(
        version=1,
        created_at=NOW,
        fleet="synthetic",
        inputs_digest="synthetic",
        capacity_source="roofline-prior",
        solver=SolverReport(
            backend="synthetic",
            status="feasible",
            objective=0,
            bound=0,
            gap=0,
            solve_s=0,
            time_limit_s=0,
        ),
        replicas=tuple(
            ReplicaPlan(
                id=s.id,
                kind=s.model,
                accelerator=ACCELERATOR,
                model=s.model,
                load_cap_rps=rng.uniform(2.0, 10.0),
                planned_rps=1.0,
                kv_budget_tokens=s.kv_capacity_tokens,
                warm_prefix_tokens=0,
            )
            for s in states
        ),
        groups=tuple(plan_groups),
        defaults=tuple(defaults),
    )
    no_default = tenant_names[len(with_default) :]
    out: list[RouteQuery] = []
    for _ in range(queries):
        u = rng.random()
        extra = rng.randint(0, 24)
        if u < GROUP_SHARE:
            tenant, model, chain = group_chains[rng.randrange(groups)]
            tail = chain_block_ids((rng.getrandbits(62) for _ in range(extra)), root=chain[-1])
            hashes = chain + tail
        else:
            tenant = rng.choice(with_default if u < GROUP_SHARE + DEFAULT_SHARE else no_default)
            model = rng.choice(MODELS)
            hashes = chain_block_ids(rng.getrandbits(62) for _ in range(1 + extra))
        out.append(
            RouteQuery(
                tenant=tenant,
                model=model,
                request_class="interactive",
                block_hashes=hashes,
                input_tokens=min(MAX_PROMPT_TOKENS, len(hashes) * 512 + rng.randrange(512)),
                max_output_tokens=256,
            )
        )
    return RouteInstance(states=states, plan=plan, queries=out)


def measure_http(
    path: PlacementRoutePath,
    queries: list[RouteQuery],
    *,
    rate: float,
    duration_s: float,
    runs: int,
) -> dict[str, Any]:
    """The HTTP API (``serving.api``) on this same path and queries: the service in a
    subprocess, wrk in another (:mod:`bench.http_route`); medians of ``runs`` runs."""
    from bench.http_route import measure

    return measure(path, queries, rate=rate, duration_s=duration_s, runs=runs)


def _percentile(sorted_values: list[int], q: float) -> float:
    return float(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))])


def _time_singles(
    path: PlacementRoutePath, queries: list[RouteQuery]
) -> tuple[list[int], Counter[str]]:
    decide = path.decide
    clock = time.perf_counter_ns
    times: list[int] = []
    reasons: Counter[str] = Counter()
    for q in queries:
        t0 = clock()
        try:
            d = decide(q, NOW)
            reason = d.reason
        except NoReplica:
            reason = "no-replica"
        times.append(clock() - t0)
        reasons[reason] += 1
    return times, reasons


def run_route_bench(
    *,
    replicas: int,
    groups: int,
    queries: int,
    repeats: int,
    seed: int,
    out: Path | None,
    profile: Path | None = None,
    http_rate: float = 2_000.0,
    http_duration_s: float = 10.0,
    http_runs: int = 3,
) -> dict[str, Any]:
    """``profile``: a route profile YAML (None: data/profiles/default.yaml)."""
    instance = synthetic_instance(replicas=replicas, groups=groups, queries=queries, seed=seed)
    path = PlacementRoutePath(instance.states, profile=load_profile(profile))
    t0 = time.perf_counter()
    path.install_plan(instance.plan)
    install_s = time.perf_counter() - t0
    _time_singles(path, instance.queries[: min(len(instance.queries), 10_000)])  # warm-up
    p50s: list[float] = []
    p99s: list[float] = []
    rates: list[float] = []
    reasons: Counter[str] = Counter()
    for _ in range(repeats):
        times, reasons = _time_singles(path, instance.queries)
        times.sort()
        p50s.append(_percentile(times, 0.50) / 1e3)
        p99s.append(_percentile(times, 0.99) / 1e3)
        t0 = time.perf_counter()
        path.decide_batch(instance.queries, NOW)
        rates.append(len(instance.queries) / (time.perf_counter() - t0))
    http = measure_http(
        path, instance.queries, rate=http_rate, duration_s=http_duration_s, runs=http_runs
    )
    total = sum(reasons.values())
    payload: dict[str, Any] = {
        "replicas": replicas,
        "groups": groups,
        "profile": path.profile.name,
        "queries": queries,
        "repeats": repeats,
        "plan_install_s": install_s,
        "in_process_p50_us": statistics.median(p50s),
        "in_process_p99_us": statistics.median(p99s),
        "http_rate": http_rate,
        "http_rps": http["rps"],
        "http_p50_ms": http["p50_ms"],
        "http_p99_ms": http["p99_ms"],
        "http_p999_ms": http["p999_ms"],
        "http_cpu_us_per_decision": http["cpu_us_per_decision"],
        "http_errors": http["errors"],
        "http_runs": http["runs"],
        "batch_decisions_per_s": statistics.median(rates),
        "reasons": {r: n / total for r, n in sorted(reasons.items())},
    }
    rows = [
        {"figure": k, "value": payload[k]}
        for k in (
            "replicas",
            "groups",
            "plan_install_s",
            "in_process_p50_us",
            "in_process_p99_us",
            "batch_decisions_per_s",
            "http_rps",
            "http_p50_ms",
            "http_p99_ms",
            "http_cpu_us_per_decision",
            "http_errors",
        )
    ] + [{"figure": f"share {r}", "value": s} for r, s in payload["reasons"].items()]
    print_table(
        f"route path: {replicas} replicas, {groups} prefix groups", rows, ("figure", "value")
    )
    if out is not None:
        write_json(out, payload)
    return payload
