"""Leases live for their request's predicted completion (with a margin, floor and ceiling) and
expire in order of their own expiry times."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from serving.leases import Lease, LeaseBook, LeaseTerms
from serving.route.types import RouteQuery

QUERY = RouteQuery(
    tenant="t",
    model="m",
    request_class="interactive",
    block_hashes=(),
    input_tokens=10,
    max_output_tokens=100,
)


@pytest.mark.parametrize(
    ("ttft", "tokens", "tpot", "lifetime"),
    [
        (0.5, 500, 0.02, 2 * (0.5 + 10.0)),  # margin × predicted completion
        (0.1, 10, 0.01, 10.0),  # a short request: the floor
        (1.0, 100_000, 0.05, 300.0),  # an enormous one: the ceiling
    ],
)
def test_lifetime_is_margin_times_predicted_completion_within_floor_and_ceiling(
    ttft: float, tokens: int, tpot: float, lifetime: float
) -> None:
    assert LeaseTerms().lifetime_s(ttft, tokens, tpot) == pytest.approx(lifetime)


def test_terms_refuse_a_margin_below_one() -> None:
    with pytest.raises(InputError, match="lease_margin"):
        LeaseTerms(margin=0.5)


def lease(expires_at: float) -> Lease:
    return Lease(QUERY, "r0", expires_at)


def test_leases_expire_soonest_first_whatever_order_they_were_taken_in() -> None:
    book = LeaseBook()
    for i, at in enumerate((30.0, 10.0, 20.0, 40.0)):
        book.add(f"d{i}", lease(at))
    assert [x.expires_at for x in book.expired(25.0, limit=10)] == [10.0, 20.0]
    assert len(book) == 2 and "d0" in book and "d1" not in book
    assert book.next_expiry() == 30.0


def test_a_reported_lease_never_expires_and_the_limit_bounds_one_sweep() -> None:
    book = LeaseBook()
    for i in range(10):
        book.add(f"d{i}", lease(float(i)))
    assert book.pop("d0") is not None and book.pop("d0") is None
    assert [x.expires_at for x in book.expired(100.0, limit=3)] == [1.0, 2.0, 3.0]
    assert len(book) == 6


def test_stale_entries_are_compacted_away() -> None:
    book = LeaseBook()
    for i in range(5000):
        book.add(f"d{i}", lease(1e9 + i))
        book.pop(f"d{i}")
    assert len(book) == 0
    assert len(book._expiry) <= 1025  # compacted, not 5,000 stale entries
    assert book.next_expiry() is None
