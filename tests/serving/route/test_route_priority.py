"""A route path whose replicas schedule by priority keeps their queued prompts by priority."""

from __future__ import annotations

import dataclasses

import pytest
from route_builders import NOW, make_path, query, states

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import PRIORITY_KEY, SloGate
from serving.route import PlacementRoutePath
from serving.route.plugins.base import queued_ahead_tokens


def _path(n: int = 1, *, by_priority: bool = True) -> PlacementRoutePath:
    path = make_path(states(n))
    path.by_priority = by_priority
    return path


def test_queued_prompts_are_kept_by_priority_until_their_first_token() -> None:
    path = _path()
    batch = dataclasses.replace(query(tokens=3000), priority=1)
    chat = dataclasses.replace(query(tokens=500), priority=0)
    for q in (batch, chat):
        path.on_dispatch(path.decide(q, NOW), q, NOW)
    state = path.replicas[0]
    assert state.prefill_tokens_by_priority == {1: 3000, 0: 500}
    path.on_first_token(state.id, batch, NOW + 1)
    assert state.prefill_tokens_by_priority == {0: 500}
    path.on_complete(state.id, batch, NOW + 2, ok=True, output_tokens=64)
    path.on_complete(state.id, chat, NOW + 2, ok=False)  # no first token: still counted once
    assert state.prefill_tokens_by_priority == {}
    assert state.in_flight_prefill_tokens == 0


def test_without_priority_scheduling_nothing_is_kept_by_priority() -> None:
    path = _path(by_priority=False)
    q = dataclasses.replace(query(tokens=3000), priority=1)
    path.on_dispatch(path.decide(q, NOW), q, NOW)
    assert path.replicas[0].prefill_tokens_by_priority == {}


def test_only_the_queue_of_equal_or_better_priority_is_ahead() -> None:
    (state,) = states(1)
    state.in_flight_prefill_tokens = 10_000
    assert queued_ahead_tokens(state, 0) == 10_000  # no split kept: the whole queue
    state.prefill_tokens_by_priority = {0: 2_000, 1: 8_000}
    assert queued_ahead_tokens(state) == 10_000
    assert queued_ahead_tokens(state, 0) == pytest.approx(2_000)
    assert queued_ahead_tokens(state, 1) == pytest.approx(10_000)
    # a scraped queue larger than the router's own count is split in the same shares
    state.num_requests_waiting = 100.0
    whole = queued_ahead_tokens(state)
    assert whole > 10_000
    assert queued_ahead_tokens(state, 0) == pytest.approx(0.2 * whole)


def test_the_gate_forecasts_a_better_priority_behind_less_and_calibrates_priorities_apart() -> None:
    path = _path()
    gate = SloGate(DEFAULT_CLASSES)
    backlog = dataclasses.replace(query(tokens=60_000), priority=1)
    path.on_dispatch(path.decide(backlog, NOW), backlog, NOW)
    urgent = dataclasses.replace(query(tokens=500), priority=0)
    late = dataclasses.replace(query(tokens=500), priority=1)
    ahead = gate.forecast(path, urgent, path.decide(urgent, NOW), NOW).ttft_s
    behind = gate.forecast(path, late, path.decide(late, NOW), NOW).ttft_s
    assert behind > 5 * ahead
    # a late first token of priority 1 teaches its own calibration, not priority 0's
    rid = path.replicas[0].id
    for i in range(20):
        q = dataclasses.replace(query(tokens=500), priority=1)
        seen = gate.forecast(path, q, path.decide(q, NOW), NOW)
        gate.dispatched(rid, q, NOW + i, seen)
        gate.first_token(q, NOW + i + 5 * seen.ttft_s)
    assert gate.calibration.ratio(rid + PRIORITY_KEY + "1") > 1.5
    assert gate.calibration.ratio(rid) == pytest.approx(1.0)
