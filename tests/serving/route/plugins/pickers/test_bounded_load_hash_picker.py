"""``bounded-load-hash-picker``: the first eligible replica clockwise from the key whose load
after placement stays within ceil((1 + ε)(pool in flight + 1) / pool size), then the next
healthy replicas clockwise; over-bound probes ranked by load when none fits.

Cases name replicas by their position on the ring walk from the request's key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from route_builders import chain, query, states

from placement.domain.scoring import load_bound
from placement.errors import InputError
from serving.route.plugins import PICKERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.pickers.bounded_load_hash_picker import (
    DEFAULT_EPSILON,
    RANKED,
    BoundedLoadHashPicker,
)
from serving.route.types import ReplicaState, RouteQuery

MakeContext = Callable[..., FallbackContext]


def _ring(make_ctx: MakeContext, fleet: Sequence[ReplicaState], q: RouteQuery) -> list[int]:
    """Fleet indices in ring order from the query's key (the walk is the context's)."""
    order = list(make_ctx(fleet, q).ring_order())
    assert sorted(order) == list(range(len(fleet)))
    return order


@pytest.mark.parametrize(
    ("n", "loads", "ineligible", "unhealthy", "limit", "epsilon", "expected"),
    [
        # an idle pool: the key's first replica, then the next clockwise (RANKED in all)
        (4, {}, (), (), 8, 0.25, [0, 1, 2, 3]),
        (8, {}, (), (), 8, 0.25, [0, 1, 2, 3]),
        # over the bound: 3 in flight, bound ceil(1.25 · 4 / 4) = 2 → the next one
        (4, {0: 3}, (), (), 8, 0.25, [1, 2, 3]),
        # even one in flight is over on an otherwise idle pool: bound ceil(1.25 · 2 / 4) = 1
        (4, {0: 1}, (), (), 8, 0.25, [1, 2, 3]),
        # within the bound: 1 in flight of 7, bound ceil(1.25 · 8 / 4) = 3
        (4, {0: 1, 2: 6}, (), (), 8, 0.25, [0, 1, 2, 3]),
        # two over the bound (total 4, bound 2): the walk moves on past both
        (4, {0: 2, 1: 2}, (), (), 8, 0.25, [2, 3]),
        # a larger ε admits more: bound ceil(4 · 4 / 4) = 4 holds 3 + 1
        (4, {0: 3}, (), (), 8, 3.0, [0, 1, 2, 3]),
        (4, {0: 3}, (), (), 8, 1.0, [1, 2, 3]),
        # an ineligible replica is skipped, and not offered again after the choice
        (4, {}, (0,), (), 8, 0.25, [1, 2, 3]),
        # alternates need only be healthy: an ineligible but healthy replica is offered
        (4, {}, (2,), (), 8, 0.25, [0, 1, 2, 3]),
        # … an unhealthy one is not
        (4, {}, (2,), (2,), 8, 0.25, [0, 1, 3]),
        (8, {}, (1, 2), (1, 2), 8, 0.25, [0, 3, 4, 5]),
        # every probe over the bound (the rest ineligible): probes ranked by load
        (4, {0: 6, 1: 4}, (2, 3), (), 8, 0.25, [1, 0]),
        (4, {0: 4, 1: 6}, (2, 3), (), 8, 0.25, [0, 1]),
        # the walk probes at most `limit` eligible replicas, even if a later one fits
        (4, {0: 3}, (), (), 1, 0.25, [0]),
        (4, {0: 5, 1: 3}, (), (), 2, 0.25, [1, 0]),
        # nothing eligible: an empty ranking
        (4, {}, (0, 1, 2, 3), (), 8, 0.25, []),
    ],
)
def test_bounded_load_ranking(
    make_ctx: MakeContext,
    n: int,
    loads: dict[int, int],
    ineligible: tuple[int, ...],
    unhealthy: tuple[int, ...],
    limit: int,
    epsilon: float,
    expected: list[int],
) -> None:
    fleet = states(n)
    q = query(chain(1, 2))
    ring = _ring(make_ctx, fleet, q)
    for pos, load in loads.items():
        fleet[ring[pos]].in_flight = load
    for pos in unhealthy:
        fleet[ring[pos]].healthy = False
    ctx = make_ctx(fleet, q, ineligible=[ring[p] for p in ineligible], limit=limit)
    ranked = BoundedLoadHashPicker(epsilon=epsilon).rank(ctx)
    assert ranked == [ring[p] for p in expected]
    assert len(ranked) <= RANKED


@pytest.mark.parametrize("hashes", [chain(1, 2), chain(1, 3), chain(1, 2, 3), chain(1)])
def test_requests_sharing_the_first_block_meet_the_same_replicas(
    make_ctx: MakeContext, hashes: tuple[int, ...]
) -> None:
    fleet = states(8)
    picker = BoundedLoadHashPicker()
    first = picker.rank(make_ctx(fleet, query(chain(1, 2)), key_blocks=1))
    assert picker.rank(make_ctx(fleet, query(hashes), key_blocks=1)) == first


@pytest.mark.parametrize(("n", "requests"), [(4, 40), (8, 80), (5, 23)])
def test_load_stays_within_the_bound(make_ctx: MakeContext, n: int, requests: int) -> None:
    fleet = states(n)
    picker = BoundedLoadHashPicker()
    for _ in range(requests):  # one hot key, nothing completing
        ctx = make_ctx(fleet, query(chain(1, 2)))
        choice = picker.rank(ctx)[0]
        total = sum(s.in_flight for s in fleet)
        assert fleet[choice].in_flight + 1 <= load_bound(total, 1.0 / n, DEFAULT_EPSILON)
        fleet[choice].in_flight += 1
    loads = [s.in_flight for s in fleet]
    assert sum(loads) == requests
    assert max(loads) <= load_bound(requests - 1, 1.0 / n, DEFAULT_EPSILON)
    # the hot key spilled past its first replica, which still holds the most
    assert sum(load > 0 for load in loads) > 1
    first = next(make_ctx(fleet, query(chain(1, 2))).ring_order())
    assert loads[first] == max(loads)


def test_ranks_only_the_query_models_pool(make_ctx: MakeContext) -> None:
    fleet = states(3) + states(3, model="other-model", prefix="o")
    ranked = BoundedLoadHashPicker().rank(make_ctx(fleet, query(chain(1, 2))))
    assert sorted(ranked) == [0, 1, 2]
    assert BoundedLoadHashPicker().rank(make_ctx(fleet, query(chain(1), model="unknown"))) == []


def test_bounded_load_hash_picker_labels() -> None:
    assert BoundedLoadHashPicker.name == "bounded-load-hash-picker"
    assert "in_flight" in BoundedLoadHashPicker.signals
    assert PICKERS["bounded-load-hash-picker"] == BoundedLoadHashPicker.from_params


@pytest.mark.parametrize(
    ("raw", "epsilon"),
    [
        ({}, DEFAULT_EPSILON),
        ({"epsilon": 0.5}, 0.5),
        ({"epsilon": 2}, 2.0),
        ({"epsilon": 1e-3}, 1e-3),
    ],
)
def test_bounded_load_hash_picker_from_params(raw: dict[str, Any], epsilon: float) -> None:
    made = BoundedLoadHashPicker.from_params(
        Params(raw, source="test.yaml", field="fallbacks.picker"), ()
    )
    assert isinstance(made, BoundedLoadHashPicker)
    assert made.epsilon == epsilon


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"epsilon": 0}, "epsilon", "got 0"),
        ({"epsilon": -0.25}, "epsilon", "got -0.25"),
        ({"epsilon": "0.25"}, "epsilon", "got '0.25'"),
        ({"epsilon": True}, "epsilon", "got True"),
        ({"epsilon": None}, "epsilon", "got None"),
        ({"eps": 0.25}, "eps", "unknown parameter"),
        ({"epsilon": 0.25, "replicas": 3}, "replicas", "unknown parameter"),
    ],
)
def test_bounded_load_hash_picker_refuses_bad_params(
    raw: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as err:
        BoundedLoadHashPicker.from_params(
            Params(raw, source="test.yaml", field="fallbacks.picker"), ()
        )
    assert err.value.field == f"fallbacks.picker.{field}"
    assert field in str(err.value)
