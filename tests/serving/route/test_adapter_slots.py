"""The router's book of LoRA slots: which live adapters hold a replica's slots, which requests
wait for one, and how long a new request would wait."""

from __future__ import annotations

import pytest

from serving.route.adapter_slots import MIN_RELEASES, SlotBook


def _running(book: SlotBook, adapter: str, prompt: int = 100) -> None:
    book.dispatched(adapter, prompt)
    book.first_token(adapter, prompt)


def test_adapters_past_their_first_token_hold_the_slots_and_the_rest_wait_in_order() -> None:
    book = SlotBook(2)
    _running(book, "a")
    _running(book, "b")
    book.dispatched("c", 300)
    book.dispatched("c", 200)
    book.dispatched("d", 50)
    assert book.blocked() == (3, 550)  # c's two requests and d's: no slot for either
    # b's request ends: its slot goes to c (first to wait), d still waits
    book.completed("b", 0, 1.0)
    assert book.blocked() == (1, 50)


def test_a_free_slot_goes_to_the_first_adapter_waiting_and_nothing_waits_while_one_is_free() -> (
    None
):
    book = SlotBook(3)
    _running(book, "a")
    book.dispatched("b", 10)
    book.dispatched("c", 10)
    # one running, two not started: both fit the two free slots
    assert book.blocked() == (0, 0)
    assert book.wait_s("new", 0.0) == 0.0  # three live adapters, so "new" would wait …
    book.dispatched("d", 10)
    assert book.blocked() == (1, 10)  # … and d does: b and c took the free slots


def test_the_wait_is_unknown_until_slots_have_turned_over_then_counts_those_ahead() -> None:
    book = SlotBook(1)
    _running(book, "hot")
    book.dispatched("x", 10)
    assert book.wait_s("x", 0.0) == 0.0  # no slot frees seen yet: unknown, taken as none
    book.completed("hot", 0, 0.0)  # the slot frees (x takes it) …
    book.completed("x", 10, 0.0)  # … x gave up before starting: nothing to release
    for k in range(1, MIN_RELEASES):  # short requests of one adapter come and go
        _running(book, "r")
        book.completed("r", 0, float(k))
    t = float(MIN_RELEASES)
    rate = book.release_rate(t)
    assert rate == pytest.approx(MIN_RELEASES / t)
    _running(book, "hot")
    book.dispatched("x", 10)
    # "hot" holds the one slot; x waits first in line, y would wait behind it
    assert book.wait_s("x", t) == pytest.approx(1 / rate)
    assert book.wait_s("y", t) == pytest.approx(2 / rate)
    assert book.wait_s("hot", t) == 0.0  # it holds its slot
    # slots that stop turning over read as slower and slower
    assert book.wait_s("x", 10 * t) > book.wait_s("x", t)


def test_censored_a_book_with_too_few_frees_reads_the_time_without_one_as_a_slow_rate() -> None:
    book = SlotBook(1, censored=True)
    assert book.release_rate(5.0) is None  # nothing sent yet: nothing watched
    book.dispatched("hot", 10, now=2.0)
    book.first_token("hot", 10)
    book.dispatched("x", 10, now=3.0)
    # no free in the 8 s since the book opened: at most about one per 8 s
    assert book.release_rate(10.0) == pytest.approx(1 / 8)
    assert book.wait_s("x", 10.0) == pytest.approx(8.0)
    assert book.wait_s("y", 10.0) == pytest.approx(16.0)  # behind x, and its own handover
    assert book.wait_s("x", 42.0) > book.wait_s("x", 10.0)  # the longer none, the slower
    book.completed("hot", 0, 12.0)  # one free in 10 s: (1 + 1) / 10
    assert book.release_rate(12.0) == pytest.approx(2 / 10)
    # without the setting the same book's wait is unknown, taken as none
    plain = SlotBook(1)
    plain.dispatched("hot", 10, now=2.0)
    plain.first_token("hot", 10)
    assert plain.release_rate(10.0) is None and plain.wait_s("x", 10.0) == 0.0


def test_censored_the_rate_is_the_books_own_once_enough_frees_were_seen() -> None:
    books = [SlotBook(1, censored=censored) for censored in (False, True)]
    for book in books:
        book.dispatched("r", 10, now=0.0)
        for k in range(MIN_RELEASES):
            _running(book, "r")
            book.completed("r", 0, float(k + 1))
    t = 2.0 * MIN_RELEASES
    assert books[1].release_rate(t) == books[0].release_rate(t) is not None


def test_the_handovers_a_request_waits_for_are_the_adapters_ahead_of_it_and_its_own() -> None:
    book = SlotBook(2)
    _running(book, "a")
    assert book.handovers("new") == 0  # one slot is free
    _running(book, "b")
    assert book.handovers("a") == 0  # it holds its slot
    assert book.handovers("new") == 1  # its own: the next slot to free
    book.dispatched("c", 10)
    book.dispatched("d", 10)
    assert book.handovers("c") == 1  # first in line
    assert book.handovers("d") == 2  # behind c
    assert book.handovers("new") == 3  # behind c and d
    # the rate's wait is the same count over the release rate (unknown yet: none)
    assert book.wait_s("new", 1.0) == 0.0


def test_a_slot_frees_when_an_adapters_last_running_request_ends_though_more_wait() -> None:
    book = SlotBook(1)
    _running(book, "a")
    book.dispatched("a", 10)  # a second request of a, not started
    book.dispatched("b", 10)
    assert book.blocked() == (1, 10)  # b waits; a's own second request does not (a holds)
    book.completed("a", 0, 1.0)  # a's running request ends: its slot is free for b
    assert book.release_rate(1.0) is None and len(book._releases) == 1
    assert book.blocked() == (1, 10)  # b took the slot; a's second request now waits


def test_a_request_that_ends_without_a_first_token_leaves_the_queue() -> None:
    book = SlotBook(1)
    _running(book, "a")
    book.dispatched("b", 70)
    assert book.blocked() == (1, 70)
    book.completed("b", 70, 1.0)  # failed before its first token
    assert book.blocked() == (0, 0)
    book.completed("a", 0, 2.0)
    assert book.wait_s("c", 3.0) == 0.0  # nothing live: a slot is free


def test_the_book_says_since_when_the_adapters_waiting_for_a_slot_have_waited_and_whose() -> None:
    book = SlotBook(1)
    assert book.starved() == (float("inf"), ())
    book.dispatched("hot", 10, tenant="t-hot", now=1.0)
    assert book.starved() == (float("inf"), ())  # it takes the free slot
    book.first_token("hot", 10)
    book.dispatched("hot", 10, tenant="t-hot", now=2.0)  # its second request runs in its slot
    book.dispatched("cold", 10, tenant="t-cold", now=3.0)
    book.dispatched("cold", 10, tenant="t-cold", now=4.0)
    book.dispatched("other", 10, tenant="t-other", now=5.0)
    assert book.starved() == (3.0, ("t-cold", "t-other"))  # the first to wait: since 3 s
    book.completed("hot", 0, 6.0)
    assert book.starved() == (3.0, ("t-cold", "t-other"))  # "hot" still runs a request
    book.first_token("hot", 10)
    book.completed("hot", 0, 7.0)  # its slot frees: "cold" takes it, "other" still waits
    assert book.starved() == (5.0, ("t-other",))
    # an adapter that stops running while a request of its own still waits waits from then on
    book.first_token("cold", 10)
    book.dispatched("fresh", 10, tenant="t-fresh", now=8.0)
    book.completed("cold", 0, 9.0)  # its slot goes to the first live adapter waiting: itself
    assert book.starved() == (5.0, ("t-other", "t-fresh"))
    book.completed("other", 10, 9.5)  # "other" gave up: "fresh" has waited since 8 s
    assert book.starved() == (8.0, ("t-fresh",))
