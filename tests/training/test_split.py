"""The time split: earlier arrivals train, later ones are held out, never mixed."""

from __future__ import annotations

import pandas as pd
import pytest

from placement.errors import InputError
from training.split import split_by_time


def _frame(seconds: list[float]) -> pd.DataFrame:
    t0 = pd.Timestamp("2026-03-01T12:00:00Z")
    # shuffled on purpose: the split must sort by time, not trust row order
    rows = pd.DataFrame(
        {"arrival_time": [t0 + pd.Timedelta(seconds=s) for s in seconds], "x": seconds}
    )
    return rows.sample(frac=1.0, random_state=3)


def test_every_training_row_arrives_before_every_heldout_row() -> None:
    split = split_by_time(_frame([float(i) for i in range(200)]), 0.7, min_rows=10)
    assert len(split.train) == 140
    assert len(split.heldout) == 60
    assert split.train["arrival_time"].max() < split.heldout["arrival_time"].min()
    assert split.heldout["arrival_time"].min() == split.cut


def test_requests_arriving_at_the_same_instant_stay_on_one_side() -> None:
    seconds = [float(i // 10) for i in range(100)]  # ten arrivals per second
    split = split_by_time(_frame(seconds), 0.75, min_rows=10)
    assert set(split.train["x"]).isdisjoint(set(split.heldout["x"]))
    assert len(split.train) + len(split.heldout) == 100


def test_too_few_rows_on_one_side_names_both_counts() -> None:
    with pytest.raises(InputError) as err:
        split_by_time(_frame([float(i) for i in range(60)]), 0.9, min_rows=10)
    message = str(err.value)
    assert "54 training" in message
    assert "6 held-out" in message


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 1.5])
def test_a_fraction_outside_zero_one_is_refused(fraction: float) -> None:
    with pytest.raises(InputError, match="train_fraction"):
        split_by_time(_frame([float(i) for i in range(200)]), fraction)


def test_missing_arrival_time_is_refused() -> None:
    with pytest.raises(InputError, match="arrival_time"):
        split_by_time(pd.DataFrame({"x": range(200)}), 0.7)
