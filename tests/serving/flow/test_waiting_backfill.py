"""The gateway's waiting room pumps as the queue says: a refused candidate does not end the pump
when the band backfills, so what fits behind a blocked head is placed, and a new arrival of
that band tries at once."""

from __future__ import annotations

import asyncio

import pytest

from serving.flow import FlowPolicy
from serving.flow.waiting import WaitingRoom
from serving.route.types import RouteQuery
from serving.service import Refused
from tests.serving.flow.rooms import interactive_query, waiting_room

LONG, SHORT = 8000, 100  # prompt tokens


class Fleet:
    """Takes the prompts no longer than ``fits`` tokens (0: none), answering their tenant."""

    def __init__(self) -> None:
        self.fits = 0
        self.placed: list[str] = []

    def route(self, query: RouteQuery, retry: bool = False) -> str:
        if query.input_tokens > self.fits:
            raise Refused("slo", 1)
        self.placed.append(query.tenant)
        return query.tenant


def _room(fleet: Fleet, backfill: int) -> WaitingRoom:
    policy = FlowPolicy(order="fifo", max_queued=16, backfill=backfill)
    return waiting_room(fleet.route, policy, prefill_tokens_per_s=1e6)


@pytest.mark.parametrize(("backfill", "placed"), [(0, []), (2, ["short", "arrival"])])
def test_what_fits_behind_a_blocked_head_is_placed_only_with_backfill(
    backfill: int, placed: list[str]
) -> None:
    async def run() -> None:
        fleet = Fleet()
        room = _room(fleet, backfill)
        waiting = [
            asyncio.ensure_future(room.route(interactive_query(n, t), arrival=0.0, ttft_slo_s=60.0))
            for n, t in (("long", LONG), ("short", SHORT))
        ]
        await asyncio.sleep(0)
        assert room.queue.waiting == 2  # the fleet took neither
        fleet.fits = SHORT
        room.pump()
        arrival = asyncio.ensure_future(
            room.route(interactive_query("arrival", SHORT), arrival=0.0, ttft_slo_s=60.0)
        )
        await asyncio.sleep(0)
        assert fleet.placed == placed
        assert room.queue.waiting == 3 - len(placed)  # the long head still waits
        for future in (*waiting, arrival):
            future.cancel()
        await asyncio.gather(*waiting, arrival, return_exceptions=True)

    asyncio.run(run())
