"""The simulator's comparison set: peer routing policies, reimplemented from their published
algorithms, by name.

``make_policy("llm_d", PolicyContext(seed=1))`` builds one; :data:`PEER_POLICIES` lists all.
Every policy filters on model and health first and only reads what a real router sees
(:class:`sim.router.ReplicaView`). The service's own route path runs beside them through
:mod:`bench.policies`.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.errors import InputError
from sim.peers import (
    chbl,
    dynamo,
    gie_lora,
    least_outstanding,
    llm_d,
    power_of_two,
    preble_e2,
    round_robin,
    sglang_cache_aware,
    uniform_random,
)
from sim.peers.chbl import ChblConfig
from sim.peers.context import PolicyContext
from sim.peers.dynamo import DynamoConfig
from sim.peers.llm_d import LlmdConfig
from sim.peers.preble_e2 import PrebleConfig
from sim.peers.sglang_cache_aware import SglangConfig
from sim.router import RoutingPolicy

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
    "gie_lora": gie_lora.build,
}


def make_from(registry: dict[str, PolicyFactory], name: str, ctx: PolicyContext) -> RoutingPolicy:
    """A fresh instance of ``registry[name]`` (each instance keeps its own state).

    Raises :class:`InputError` naming the valid policies when ``name`` is unknown.
    """
    factory = registry.get(name)
    if factory is None:
        raise InputError(
            f"unknown routing policy {name!r}",
            field="policy",
            expected="one of " + ", ".join(sorted(registry)),
        )
    return factory(ctx)


def make_policy(name: str, ctx: PolicyContext) -> RoutingPolicy:
    """A fresh instance of the peer policy called ``name``."""
    return make_from(PEER_POLICIES, name, ctx)


__all__ = [
    "PEER_POLICIES",
    "ChblConfig",
    "DynamoConfig",
    "LlmdConfig",
    "PolicyContext",
    "PolicyFactory",
    "PrebleConfig",
    "SglangConfig",
    "make_from",
    "make_policy",
]
