"""Arrival profile: every arrival counted once, in bins aligned across units."""

from __future__ import annotations

import numpy as np

from placement.solver.arrivals import ARRIVAL_BIN_S, MAX_BINS, arrival_counts


def test_counts_keep_every_arrival_in_aligned_bins() -> None:
    a = [10.0, 10.1, 10.2, 19.9]  # the window starts at the first arrival of any unit
    b = [10.6, 12.0]
    counts, width = arrival_counts([a, b], 10.0)
    assert width == ARRIVAL_BIN_S
    assert counts.shape == (2, 20)
    assert counts.sum(axis=1).tolist() == [4.0, 2.0]
    assert counts[0, 0] == 3 and counts[0, 19] == 1
    assert counts[1, 1] == 1 and counts[1, 4] == 1


def test_arrivals_past_the_window_fall_into_its_last_bin() -> None:
    counts, _ = arrival_counts([[0.0, 50.0]], 10.0)
    assert counts[0, -1] == 1 and counts.sum() == 2


def test_a_long_window_takes_wider_bins() -> None:
    counts, width = arrival_counts([np.linspace(0, 3600, 100).tolist()], 3600.0)
    assert counts.shape[1] == MAX_BINS and width == 3600.0 / MAX_BINS
    assert counts.sum() == 100


def test_no_arrivals_no_bins() -> None:
    counts, width = arrival_counts([[], []], 10.0)
    assert counts.shape == (2, 0) and width == 0.0
