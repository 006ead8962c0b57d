"""The simulator's flow control: placed at once or queued by band, refused at the door when it
cannot be met, batch work only on idle capacity, the result cache."""

from __future__ import annotations

import pytest

from bench.flow.holding import FlowHolding
from bench.flow.workload import CLASSES
from placement.domain.requests import Request
from serving.flow import FlowPolicy, IdlePolicy


def _req(i: int, cls: str, *, arrival: float = 0.0, tokens: int = 1000) -> Request:
    return Request(i, arrival, tokens, 10, tenant="acme", request_class=cls, block_hashes=(i,))


class Fleet:
    """A fleet that takes ``room`` requests, then refuses."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.placed: list[int] = []

    def place(self, req: Request, now: float) -> bool:
        if len(self.placed) >= self.room:
            return False
        self.placed.append(req.id)
        return True


def _holding(fleet: Fleet, *, max_queued: int = 100, prefill_s: float = 0.1) -> FlowHolding:
    return FlowHolding(
        CLASSES,
        FlowPolicy(max_queued=max_queued),
        in_flight=lambda: len(fleet.placed),
        budget=16,
        idle=IdlePolicy(busy_fraction=0.5, batch_fraction=0.25, calm_s=5.0),
        prefill_s=lambda r: prefill_s,
        cache_entries=8,
    )


def test_a_full_fleet_queues_and_the_top_band_goes_first() -> None:
    fleet = Fleet(room=1)
    h = _holding(fleet)
    h.arrive(_req(1, "standard"), 0.0, fleet.place)  # placed at once
    h.arrive(_req(2, "standard"), 0.1, fleet.place)  # queued
    h.arrive(_req(3, "premium", arrival=0.2), 0.2, fleet.place)  # queued, a higher band
    assert fleet.placed == [1] and h.queue.waiting == 2
    fleet.room = 3
    h.pump(0.5, fleet.place)
    assert fleet.placed == [1, 3, 2]
    assert h.ttft_budget(_req(3, "premium"), 0.5) == pytest.approx(1.7)  # due 2.2 s, now 0.5


def test_deadlines_expire_and_an_impossible_request_is_refused_at_once() -> None:
    fleet = Fleet(room=0)
    h = _holding(fleet, prefill_s=2.5)
    h.arrive(_req(1, "premium"), 0.0, fleet.place)  # 2.5 s of prefill against a 2 s SLO
    assert h.queue.waiting == 0 and h.stats.refused_at_door == 1
    h2 = _holding(fleet)
    r = _req(2, "premium")
    h2.arrive(r, 0.0, fleet.place)
    h2.pump(1.95, fleet.place)
    assert r.error == "refused: deadline" and h2.stats.deadline_misses == 1


def test_refusing_at_once_queues_nothing() -> None:
    fleet = Fleet(room=0)
    h = _holding(fleet, max_queued=0)
    r = _req(1, "premium")
    h.arrive(r, 0.0, fleet.place)
    assert r.error == "refused: queue_full" and h.queue.waiting == 0
    assert h.ttft_budget(r, 0.0) is None


def test_batch_waits_for_calm_and_idle_capacity_and_is_never_refused() -> None:
    fleet = Fleet(room=1)
    h = _holding(fleet)
    h.arrive(_req(1, "premium"), 0.0, fleet.place)
    h.arrive(_req(2, "premium"), 0.0, fleet.place)  # waits: interactive pressure at t=0
    for i in range(10, 14):
        h.arrive(_req(i, "batch"), 0.0, fleet.place)
    fleet.room = 10
    h.pump(1.0, fleet.place)  # the premium request goes; batch stays paused (not calm)
    assert fleet.placed == [1, 2] and len(h.batch) == 4
    h.pump(6.0, fleet.place)  # calm for 6 s, 2 in flight of 8 allowed: batch up to 4 of 16
    assert fleet.placed == [1, 2, 10, 11, 12, 13] and not h.batch
    assert all(not _req(i, "batch").error for i in range(10, 14))


def test_a_request_no_idle_replica_could_place_does_not_pause_batch() -> None:
    fleet = Fleet(room=0)
    h = FlowHolding(
        CLASSES,
        FlowPolicy(band_headroom=0.4),
        in_flight=lambda: len(fleet.placed),
        budget=16,
        idle=IdlePolicy(busy_fraction=0.5, batch_fraction=0.25, calm_s=5.0),
        prefill_s=lambda r: r.input_tokens / 10_000,
    )
    # 2.5 s of prefill against a 2 s SLO: refused at the door
    h.arrive(_req(1, "premium", tokens=25_000), 0.0, fleet.place)
    # 2 s of prefill: within its 3 s SLO, but past the 1.2 s its band may be forecast to take
    # (0.4 of its time left): it could never be dispatched, so it is refused at the door too
    h.arrive(_req(2, "standard", tokens=20_000), 0.0, fleet.place)
    assert h.stats.refused_at_door == 2 and h.queue.waiting == 0
    h.arrive(_req(10, "batch"), 0.0, fleet.place)
    fleet.room = 10
    h.pump(1.5, fleet.place)  # neither refusal showed load the idle fleet could take: batch goes
    assert fleet.placed == [10]
    h.arrive(_req(3, "standard", tokens=10_000), 2.0, fleet.place)  # 1 s: placeable, placed
    fleet.room = 1
    h.arrive(_req(4, "standard", tokens=10_000, arrival=2.0), 2.0, fleet.place)  # waits: load
    h.arrive(_req(11, "batch"), 2.0, fleet.place)
    h.queue.remove(next(iter(h.queue.candidates())))  # its client left: nothing waits
    h.pump(3.0, fleet.place)
    assert len(h.batch) == 1  # paused: an interactive request waited a second ago


def test_a_repeat_of_an_answered_prompt_comes_from_the_cache() -> None:
    fleet = Fleet(room=10)
    h = _holding(fleet)
    first = _req(1, "premium")
    h.arrive(first, 0.0, fleet.place)
    again = _req(1, "premium", arrival=1.0)
    h.arrive(again, 1.0, fleet.place)  # the first has not finished: not a hit
    first.finish_s = 1.5
    third = _req(1, "premium", arrival=2.0)
    h.arrive(third, 2.0, fleet.place)
    assert fleet.placed == [1, 1] and third.first_token_s == third.finish_s == 2.0
    assert h.stats.cache_hits == 1 and h.stats.cache_lookups == 3


class Picky(Fleet):
    """A fleet with room that will not take the requests in ``refuses``."""

    def __init__(self, room: int, refuses: set[int]) -> None:
        super().__init__(room)
        self.refuses = refuses

    def place(self, req: Request, now: float) -> bool:
        return req.id not in self.refuses and super().place(req, now)


@pytest.mark.parametrize(("backfill", "placed"), [(0, [1]), (1, [1, 3, 4])])
def test_backfill_places_what_fits_behind_a_blocked_head(backfill: int, placed: list[int]) -> None:
    fleet = Picky(room=1, refuses={2})
    h = FlowHolding(
        CLASSES,
        FlowPolicy(order="fifo", max_queued=100, backfill=backfill),
        in_flight=lambda: len(fleet.placed),
        budget=16,
        idle=IdlePolicy(),
        prefill_s=lambda r: 0.1,
    )
    h.arrive(_req(1, "standard"), 0.0, fleet.place)  # placed at once; the fleet is then full
    h.arrive(_req(2, "standard", arrival=0.1), 0.1, fleet.place)  # queued: its head
    h.arrive(_req(3, "standard", arrival=0.2), 0.2, fleet.place)  # queued behind it
    fleet.room = 3
    # without backfill the head holds its band back, the arrival too; with it, 3 is placed
    # by the pump and 4 at once
    h.pump(0.3, fleet.place)
    h.arrive(_req(4, "standard", arrival=0.4), 0.4, fleet.place)
    assert fleet.placed == placed
