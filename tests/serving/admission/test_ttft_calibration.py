"""Each replica's observed-over-predicted TTFT, learned from its first tokens."""

from __future__ import annotations

import pytest

from serving.admission.ttft_calibration import MAX_OPEN, PRIOR_SPREAD, TtftCalibration


def test_starts_at_the_prior_and_learns_the_replica_speed_from_long_waits() -> None:
    cal = TtftCalibration()
    assert cal.ratio("r0") == 1.0 and cal.spread("r0") == pytest.approx(PRIOR_SPREAD)
    for _ in range(200):
        cal.observe("r0", 2.0, 1.2)  # the replica prefills at 0.6 of the predicted time
    assert cal.ratio("r0") == pytest.approx(0.6, abs=0.02)
    assert cal.spread("r0") < 0.1
    assert cal.ratio("r1") == 1.0  # per replica


def test_idle_prefills_barely_move_the_ratio() -> None:
    cal = TtftCalibration()
    for _ in range(200):
        cal.observe("r0", 0.01, 0.03)  # the iteration in progress, not the prefill speed
    assert cal.ratio("r0") < 1.01


def test_first_tokens_match_their_dispatch_and_strays_are_ignored() -> None:
    cal = TtftCalibration()
    for k in range(100):
        cal.dispatched(k, "r0", 2.0, 10.0)
        cal.first_token(k, 11.0)  # 1 s after dispatch
    cal.first_token(999, 50.0)  # never dispatched: ignored
    assert cal.ratio("r0") == pytest.approx(0.5, abs=0.05)


def test_a_first_token_can_teach_a_second_calibration_with_its_own_prediction() -> None:
    cal = TtftCalibration()
    for k in range(100):
        cal.dispatched(k, "r0#a", 4.0, 10.0, also=("r0#b", 1.0))
        cal.first_token(k, 12.0)  # 2 s: half of one prediction, twice the other
    assert cal.ratio("r0#a") == pytest.approx(0.5, abs=0.05)
    assert cal.ratio("r0#b") == pytest.approx(2.0, abs=0.1)
    assert cal.ratio("r0") == 1.0
    # the evidence behind each: its decayed sum of squared predictions
    assert cal.weight("r0") == 0.0 < cal.weight("r0#b") < cal.weight("r0#a")


def test_open_requests_are_bounded() -> None:
    cal = TtftCalibration()
    for k in range(MAX_OPEN + 10):
        cal.dispatched(k, "r0", 1.0, 0.0)
    cal.first_token(0, 5.0)  # the oldest were dropped
    assert cal.ratio("r0") == 1.0
    cal.first_token(MAX_OPEN + 9, 1.0)
    assert cal.ratio("r0") == pytest.approx(1.0)
