"""Builders for route path tests: replica states, plans, queries (imported by name; the
fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence

from placement.domain.prefix import chain_block_ids
from placement.plan import DefaultRoute, Plan, PrefixGroupRoute, ReplicaPlan, Route, SolverReport
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery, profile_from_text

NOW = 100.0
MODEL = "llama-3-8b"


def states(n: int, *, model: str = MODEL, prefix: str = "r") -> list[ReplicaState]:
    return [
        ReplicaState(
            id=f"{prefix}{i}",
            address=f"10.0.0.{i}:8000",
            model=model,
            accelerator="H100-SXM",
            tp=1,
            kv_capacity_tokens=100_000,
            scraped_at=NOW,
        )
        for i in range(n)
    ]


def route(
    replicas: Sequence[str], weights: Sequence[float] | None = None, secondary: Sequence[str] = ()
) -> Route:
    w = weights if weights is not None else [1.0 / len(replicas)] * len(replicas)
    return Route(replicas=tuple(replicas), weights=tuple(w), secondary=tuple(secondary))


def group(
    chain: Sequence[int],
    r: Route,
    *,
    model: str = MODEL,
    tenant: str = "acme",
    warm: Sequence[str] = (),
) -> PrefixGroupRoute:
    return PrefixGroupRoute(
        key=chain[-1],
        depth_blocks=len(chain),
        tenant=tenant,
        model=model,
        rate_rps=1.0,
        prefix_tokens=len(chain) * 16,
        route=r,
        warm=tuple(warm),
    )


def plan(
    replica_states: Sequence[ReplicaState],
    *,
    groups: Sequence[PrefixGroupRoute] = (),
    defaults: Sequence[DefaultRoute] = (),
    version: int = 1,
    cap_rps: float = 100.0,
) -> Plan:
    return Plan(
        version=version,
        created_at=0.0,
        fleet="test",
        inputs_digest="test",
        capacity_source="roofline-prior",
        solver=SolverReport(
            backend="greedy",
            status="greedy",
            objective=0,
            bound=0,
            gap=0,
            solve_s=0,
            time_limit_s=0,
        ),
        replicas=tuple(
            ReplicaPlan(
                id=s.id,
                kind="h100",
                accelerator=s.accelerator,
                model=s.model,
                load_cap_rps=cap_rps,
                planned_rps=1.0,
                kv_budget_tokens=s.kv_capacity_tokens,
                warm_prefix_tokens=0,
            )
            for s in replica_states
        ),
        groups=tuple(groups),
        defaults=tuple(defaults),
    )


def chain(*ids: int) -> tuple[int, ...]:
    return chain_block_ids(ids)


def query(
    hashes: Sequence[int] = (), *, tenant: str = "acme", model: str = MODEL, tokens: int = 1000
) -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model=model,
        request_class="interactive",
        block_hashes=tuple(hashes),
        input_tokens=tokens,
        max_output_tokens=64,
    )


TEST_PROFILE = """
name: test
block_tokens: 16
filters:
  - health-filter
  - {name: freshness-filter, staleness_limit_s: 5.0}
  - {name: load-cap-filter, residence_s: 1.0, min_in_flight: 1, max_waiting: 100}
"""


def scored_profile(*scorers: str) -> str:
    """A profile whose plan picker is ``scored``, with these scorers at weight 1 (in order)."""
    lines = "".join(f"  - {{name: {name}, weight: 1.0}}\n" for name in scorers)
    return (
        "name: scored-test\nblock_tokens: 16\nplan_picker: scored\n"
        f"filters: [health-filter]\nscorers:\n{lines}"
    )


def make_path(
    replica_states: Sequence[ReplicaState], profile_text: str = TEST_PROFILE
) -> PlacementRoutePath:
    return PlacementRoutePath(
        replica_states, profile=profile_from_text(profile_text, source="test.yaml")
    )
