"""A gateway waiting room over a fake service: the queue and the pump are real, the route path is
the test's ``route`` (raise :class:`serving.service.Refused` to refuse)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from serving.flow import FlowPolicy
from serving.flow.waiting import WaitingRoom
from serving.route.types import RouteQuery


def waiting_room(
    route: Callable[..., str],
    policy: FlowPolicy,
    *,
    prefill_tokens_per_s: float,
    now: float = 0.0,
) -> WaitingRoom:
    registry = CollectorRegistry()
    service: Any = SimpleNamespace(
        route=route,
        replicas={},
        admission=SimpleNamespace(credit_share=lambda t: 0.5, classes={}),
        metrics=SimpleNamespace(
            registry=registry,
            tenant_label=lambda t: t,
            refusals=Counter("refusals", "", ["reason"], registry=registry),
        ),
    )
    return WaitingRoom(
        service, policy, prefill_tokens_per_s=prefill_tokens_per_s, clock=lambda: now
    )


def interactive_query(tenant: str, tokens: int) -> RouteQuery:
    """An interactive request of ``tokens`` prompt tokens, no prefix blocks, 8 output tokens."""
    return RouteQuery(
        tenant=tenant,
        model="m",
        request_class="interactive",
        block_hashes=(),
        input_tokens=tokens,
        max_output_tokens=8,
    )
