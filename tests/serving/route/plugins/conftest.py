"""Fixtures for the plugin tests: a FallbackContext over a small fleet."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import pytest
from route_builders import chain, query

from serving.route.fleet import FleetView
from serving.route.plugins.base import FallbackContext
from serving.route.types import ReplicaState, RouteQuery

MakeContext = Callable[..., FallbackContext]


def _context(
    replica_states: Sequence[ReplicaState],
    q: RouteQuery | None = None,
    *,
    ineligible: Collection[int] = (),
    preferred: tuple[int, ...] = (),
    cached: dict[int, int] | None = None,
    limit: int = 8,
    key_blocks: int = 1,
) -> FallbackContext:
    """A context as the route path builds one with no plan: ``ineligible`` replicas are the
    ones its filters refuse. Set the states' load before calling (the fleet view sums the pool's
    in-flight count when it is built)."""
    refused = frozenset(ineligible)
    return FallbackContext(
        q if q is not None else query(chain(1, 2)),
        FleetView(replica_states, virtual_nodes=64),
        None,
        lambda i: i not in refused,
        preferred,
        dict(cached or {}),
        limit,
        key_blocks,
    )


@pytest.fixture
def make_ctx() -> MakeContext:
    return _context
