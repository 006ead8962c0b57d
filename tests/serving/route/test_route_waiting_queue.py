"""The scraped waiting queue in prompt tokens: priced by what the router dispatched there, and
counted less the first tokens seen since the scrape when the profile says so."""

from __future__ import annotations

import dataclasses

import pytest
from route_builders import NOW, TEST_PROFILE, make_path, query, states

from serving.route import ReplicaState
from serving.route.plugins.base import queued_ahead_tokens, queued_prefill_tokens
from serving.route.waiting_queue import (
    PRICE_WINDOW,
    QUEUED_PROMPT_TOKENS,
    first_token,
    price_dispatch,
    waiting_tokens,
)

DISPATCHED = TEST_PROFILE + "waiting: {price: dispatched}\n"
SINCE_SCRAPE = TEST_PROFILE + "waiting: {since_scrape: true}\n"


def _state(**fields: float) -> ReplicaState:
    return dataclasses.replace(states(1)[0], **fields)  # type: ignore[arg-type]


def test_before_anything_is_dispatched_a_waiting_request_is_the_constant() -> None:
    s = _state(num_requests_waiting=3.0)
    assert waiting_tokens(s) == 3 * QUEUED_PROMPT_TOKENS
    assert queued_prefill_tokens(s) == 3 * QUEUED_PROMPT_TOKENS


def test_the_price_is_the_mean_of_the_first_dispatches_then_a_moving_average() -> None:
    s = _state(num_requests_waiting=2.0)
    for tokens in (40, 60, 110):
        price_dispatch(s, tokens)
    assert s.waiting_prompt_tokens == pytest.approx(70.0)
    assert waiting_tokens(s) == pytest.approx(140.0)
    for _ in range(PRICE_WINDOW):
        price_dispatch(s, 70)
    price_dispatch(s, 70 + PRICE_WINDOW * 10)  # past the window a dispatch weighs 1/PRICE_WINDOW
    assert s.waiting_prompt_tokens == pytest.approx(80.0)


def test_the_larger_of_the_own_count_and_the_priced_scrape_is_the_queue() -> None:
    s = _state(num_requests_waiting=4.0, in_flight_prefill_tokens=500)
    price_dispatch(s, 100)
    assert queued_prefill_tokens(s) == 500  # 4 × 100 < 500
    s.num_requests_waiting = 8.0
    assert queued_prefill_tokens(s) == 800


def test_slot_waiters_and_first_tokens_since_the_scrape_leave_the_waiting_count() -> None:
    s = _state(num_requests_waiting=5.0, slot_waiting_requests=2, slot_waiting_tokens=100)
    price_dispatch(s, 50)
    assert queued_ahead_tokens(s) == 3 * 50
    first_token(s)
    assert queued_ahead_tokens(s) == 2 * 50
    s.first_tokens_at_scrape = s.first_tokens  # a new scrape counts them no more
    assert queued_ahead_tokens(s) == 3 * 50
    for _ in range(9):
        first_token(s)
    assert waiting_tokens(s) == 0.0  # never below zero


def test_the_route_path_prices_what_it_dispatches_uncached() -> None:
    fleet = states(1)
    path = make_path(fleet, DISPATCHED)
    q = query(tokens=300)
    d = dataclasses.replace(path.decide(q, NOW), cached_tokens=100)
    path.on_dispatch(d, q, NOW)
    assert fleet[0].waiting_prompt_tokens == 200 and fleet[0].prompts_priced == 1
    path.on_first_token(d.replica_id, q, NOW)
    assert fleet[0].first_tokens == 0  # since_scrape is off by default


def test_by_default_the_constant_prices_a_waiting_request() -> None:
    fleet = states(1)
    path = make_path(fleet)
    q = query(tokens=300)
    path.on_dispatch(path.decide(q, NOW), q, NOW)
    assert fleet[0].prompts_priced == 0
    fleet[0].num_requests_waiting = 2.0
    assert waiting_tokens(fleet[0]) == 2 * QUEUED_PROMPT_TOKENS


def test_since_the_scrape_the_route_path_counts_first_tokens() -> None:
    fleet = states(1)
    path = make_path(fleet, SINCE_SCRAPE)
    q = query(tokens=300)
    d = path.decide(q, NOW)
    path.on_dispatch(d, q, NOW)
    path.on_first_token(d.replica_id, q, NOW)
    path.on_first_token(d.replica_id, q, NOW)  # reported twice: counted once
    assert fleet[0].first_tokens == 1
