"""Small hand-built fleets of ReplicaView and requests for the routing plugin tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from placement.domain.requests import Request
from placement.routing.base import ReplicaView

MakeViews = Callable[..., list[ReplicaView]]
MakeRequest = Callable[..., Request]


def _views(
    n: int,
    *,
    outstanding: Sequence[int] | None = None,
    waiting: Sequence[int] | None = None,
    kv_usage: Sequence[float] | None = None,
    models: Sequence[str] | None = None,
    healthy: Sequence[bool] | None = None,
    weights: Sequence[float] | None = None,
    kv_capacity_tokens: int = 1 << 20,
) -> list[ReplicaView]:
    views = []
    for i in range(n):
        v = ReplicaView(
            i,
            f"r{i}",
            model=models[i] if models else "m",
            accelerator="H100-SXM",
            kv_capacity_tokens=kv_capacity_tokens,
            weight=weights[i] if weights else 1.0,
        )
        v.outstanding = outstanding[i] if outstanding else 0
        v.num_waiting = waiting[i] if waiting else 0
        v.kv_usage = kv_usage[i] if kv_usage else 0.0
        v.healthy = healthy[i] if healthy else True
        views.append(v)
    return views


@pytest.fixture
def make_views() -> MakeViews:
    """``make_views(n, outstanding=[...], waiting=[...], kv_usage=[...], models=[...], ...)``."""
    return _views


_next_id = iter(range(1, 1 << 62))


def _request(
    input_tokens: int = 1024,
    *,
    hashes: Sequence[int] = (),
    block_tokens: int = 256,
    output_tokens: int = 64,
    model: str = "",
    tenant: str = "t",
    arrival_s: float = 0.0,
) -> Request:
    return Request(
        next(_next_id),
        arrival_s,
        input_tokens,
        output_tokens,
        tenant=tenant,
        model=model,
        block_hashes=tuple(hashes),
        block_tokens=block_tokens,
    )


@pytest.fixture
def make_request() -> MakeRequest:
    """``make_request(input_tokens, hashes=[...], block_tokens=256, model=..., tenant=...)``."""
    return _request
