"""The gateway's waiting room marks interactive load for the batch runner's calm window
(``pressed_at``) only for a request idle capacity could have placed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from serving.flow import FlowPolicy
from serving.flow.waiting import WaitingRoom
from serving.route.types import RouteQuery
from serving.service import Refused
from tests.serving.flow.rooms import interactive_query, waiting_room


def _refuse(query: RouteQuery, retry: bool = False) -> str:
    raise Refused("slo", 1)


def _room(max_queued: int, now: float) -> WaitingRoom:
    policy = FlowPolicy(order="fifo", max_queued=max_queued)
    return waiting_room(_refuse, policy, prefill_tokens_per_s=1000.0, now=now)


@pytest.mark.parametrize("max_queued", [0, 16])  # refusing at once, or queueing
@pytest.mark.parametrize(("tokens", "pressed"), [(1500, True), (2500, False)])
def test_a_refusal_pauses_batch_only_if_idle_capacity_could_have_placed_it(
    max_queued: int, tokens: int, pressed: bool
) -> None:
    """A 2 s TTFT SLO at 1,000 prompt tokens/s: 1.5 s of prefill fits, 2.5 s never does."""
    room = _room(max_queued, now=5.0)
    query = interactive_query("t", tokens)

    async def run() -> None:
        with pytest.raises(Refused):
            await room.route(query, arrival=5.0, ttft_slo_s=2.0)

    if max_queued:
        room.queue.offer = lambda item, now: SimpleNamespace(  # type: ignore[method-assign]
            queued=False, reason="queue_full", retry_after_s=1
        )
    asyncio.run(run())
    assert room.pressed_at == (5.0 if pressed else float("-inf"))
