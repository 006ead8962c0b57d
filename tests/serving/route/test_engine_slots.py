"""A replica's LoRA slot handovers as its engine lists them at each scrape: handovers seen
between scrapes, the time something waited, and the wait a new request would have."""

from __future__ import annotations

import math

import pytest

from serving.route.engine_slots import HORIZON_S, EngineSlots


def test_an_adapter_leaving_the_waiting_list_for_the_running_list_is_one_handover() -> None:
    slots = EngineSlots(2)
    slots.scraped(("a", "b"), ("c", "d"), 0.0)
    slots.scraped(("a", "c"), ("d",), 1.0)  # b's slot went to c: one handover in 1 s waited
    decay = math.exp(-1.0 / HORIZON_S)
    # the handover seen and the next, over the exposure (nothing more since the scrape)
    assert slots.rate(1.0) == pytest.approx(2.0 / 1.0)
    slots.scraped(("a", "c"), ("d",), 2.0)  # none in the next second
    assert slots.rate(2.0) == pytest.approx((decay + 1.0) / (decay + 1.0))


def test_a_waiting_list_that_never_turns_over_reads_slower_and_slower() -> None:
    slots = EngineSlots(1)
    slots.scraped(("hot",), ("cold",), 0.0)
    for t in (1.0, 2.0, 3.0):
        slots.scraped(("hot",), ("cold",), t)
    at_3 = slots.rate(3.0)
    assert at_3 is not None and at_3 < 1.0 / 2.5  # no handover in ~3 s waited
    later = slots.rate(13.0)  # still waiting 10 s after the last scrape
    assert later is not None and later < at_3 / 3.0
    assert slots.waited_s(13.0) == pytest.approx(13.0)  # cold listed waiting since 0
    wait, handovers = slots.wait("new", 13.0)
    assert handovers == 2  # behind cold, and its own
    assert wait == pytest.approx(2.0 / later)


def test_no_handover_is_waited_for_by_a_running_adapter_or_where_a_slot_is_free() -> None:
    slots = EngineSlots(2)
    slots.scraped(("a",), (), 0.0)
    assert slots.handovers("a") == 0
    assert slots.handovers("x") == 0  # one of two slots in use, nothing waits
    assert slots.wait("x", 5.0) == (0.0, 0)
    slots.scraped(("a", "b"), ("c", "d"), 1.0)
    assert slots.handovers("a") == 0
    assert slots.handovers("c") == 1  # first in the engine's line
    assert slots.handovers("d") == 2
    assert slots.handovers("x") == 3  # behind both, and its own


def test_nothing_ever_waiting_says_nothing_of_the_rate_and_time_without_waits_is_not_exposure() -> (
    None
):
    slots = EngineSlots(1)
    slots.scraped(("a",), (), 0.0)
    slots.scraped(("a",), (), 50.0)
    assert slots.rate(60.0) is None
    slots.scraped(("a",), ("b",), 60.0)
    slots.scraped(("b",), (), 61.0)  # b got the slot after 1 s waited
    slots.scraped(("b",), (), 100.0)  # 39 s with nothing waiting: no exposure, decay only
    exposure = math.exp(-39.0 / HORIZON_S)
    assert slots.rate(100.0) == pytest.approx((exposure + 1.0) / exposure)


def test_an_older_or_repeated_scrape_is_ignored_and_a_replica_without_slots_refused() -> None:
    slots = EngineSlots(1)
    slots.scraped(("a",), ("b",), 2.0)
    slots.scraped(("b",), (), 1.0)  # older: ignored
    slots.scraped(("b",), (), 2.0)  # the same scrape again: ignored
    assert slots.handovers("b") == 1 and slots.at == 2.0
    with pytest.raises(ValueError, match="at least one"):
        EngineSlots(0)
