"""Every routing policy a benchmark compares, by name: the peers (:mod:`sim.peers`) and the
service's own route path (``placement``, :mod:`bench.policies.route_path`)."""

from __future__ import annotations

from pathlib import Path

from bench.policies import route_path
from bench.policies.route_path import GateSettings, PlacementPolicy, PlacementSettings
from placement.plan import Plan
from sim.peers import PEER_POLICIES, PolicyContext, PolicyFactory, make_from
from sim.router import RoutingPolicy

OURS = route_path.NAME

POLICIES: dict[str, PolicyFactory] = {**PEER_POLICIES, OURS: route_path.build}


def make_policy(name: str, ctx: PolicyContext) -> RoutingPolicy:
    """A fresh instance of the policy called ``name``, a peer's or ours.

    Raises :class:`~placement.errors.InputError` naming the valid policies when ``name`` is
    unknown.
    """
    return make_from(POLICIES, name, ctx)


def policy_for_plan(
    plan: Plan, seed: int, block_tokens: int, route_profile: Path | None = None
) -> RoutingPolicy:
    """The service's route path with ``plan`` installed (what-if's simulated column), on
    ``route_profile`` (None: the default profile)."""
    settings = PlacementSettings(plan=plan, route_profile=route_profile)
    ctx = PolicyContext(seed=seed, block_tokens=block_tokens, settings={OURS: settings})
    return route_path.build(ctx)


__all__ = [
    "OURS",
    "POLICIES",
    "GateSettings",
    "PlacementPolicy",
    "PlacementSettings",
    "PolicyContext",
    "make_policy",
    "policy_for_plan",
]
