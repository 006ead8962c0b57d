"""Peer routing policies, reimplemented from their published algorithms, by name.

``make_policy("llm_d", PolicyContext(seed=1))`` builds one; :data:`PEER_POLICIES` lists all.
Every policy filters on model and health first and only reads what a real router sees.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.errors import InputError
from placement.routing.base import RoutingPolicy
from placement.routing.policies import (
    chbl,
    dynamo,
    least_outstanding,
    llm_d,
    power_of_two,
    preble_e2,
    round_robin,
    route_path,
    sglang_cache_aware,
    uniform_random,
)
from placement.routing.policies.chbl import ChblConfig
from placement.routing.policies.context import GateSettings, PolicyContext
from placement.routing.policies.dynamo import DynamoConfig
from placement.routing.policies.llm_d import LlmdConfig
from placement.routing.policies.preble_e2 import PrebleConfig
from placement.routing.policies.sglang_cache_aware import SglangConfig

PolicyFactory = Callable[[PolicyContext], RoutingPolicy]

PEER_POLICIES: dict[str, PolicyFactory] = {
    "round_robin": round_robin.build,
    "random": uniform_random.build,
    "least_outstanding": least_outstanding.build,
    "power_of_two": power_of_two.build,
    "chbl": chbl.build,
    "sglang_cache_aware": sglang_cache_aware.build,
    "llm_d": llm_d.build,
    "dynamo": dynamo.build,
    "preble_e2": preble_e2.build,
    "placement": route_path.build,
}


def make_policy(name: str, ctx: PolicyContext) -> RoutingPolicy:
    """A fresh instance of the peer policy called ``name`` (each instance keeps its own state).

    Raises :class:`InputError` naming the valid policies when ``name`` is unknown.
    """
    factory = PEER_POLICIES.get(name)
    if factory is None:
        raise InputError(
            f"unknown routing policy {name!r}",
            field="policy",
            expected="one of " + ", ".join(sorted(PEER_POLICIES)),
        )
    return factory(ctx)


__all__ = [
    "PEER_POLICIES",
    "ChblConfig",
    "DynamoConfig",
    "GateSettings",
    "LlmdConfig",
    "PolicyContext",
    "PolicyFactory",
    "PrebleConfig",
    "SglangConfig",
    "make_policy",
]
