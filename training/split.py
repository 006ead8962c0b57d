"""The time split: train on the earlier requests, evaluate on the later ones — never random rows.

Random rows would put requests from the same burst on both sides and overstate accuracy; a
predictor is used on the future, so it is judged on the future.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from placement.errors import InputError

MIN_ROWS = 50  # fewer rows on either side cannot fit four quantile models or score them


@dataclass(frozen=True, slots=True)
class TimeSplit:
    """The training part (arrivals before ``cut``) and the held-out part (from ``cut`` on)."""

    train: pd.DataFrame
    heldout: pd.DataFrame
    cut: pd.Timestamp


def split_by_time(
    frame: pd.DataFrame, train_fraction: float = 0.7, *, min_rows: int = MIN_ROWS
) -> TimeSplit:
    """The first ``train_fraction`` of rows by ``arrival_time`` train, the rest are held out.

    Rows arriving at the same instant stay on one side (the cut is a time, not a row count).
    Raises InputError if the fraction is not in (0, 1), the column is missing, or either side
    has fewer than ``min_rows`` rows (the message names both counts).
    """
    if not 0.0 < train_fraction < 1.0:
        raise InputError(
            f"train fraction {train_fraction}", field="train_fraction", expected="0 < f < 1"
        )
    if "arrival_time" not in frame.columns:
        raise InputError(
            "missing column arrival_time", field="arrival_time", expected="arrival timestamps"
        )
    ordered = frame.sort_values("arrival_time", kind="stable")
    arrival = ordered["arrival_time"]
    if arrival.isna().any():
        raise InputError(
            f"{int(arrival.isna().sum())} rows have no arrival time",
            field="arrival_time",
            expected="a timestamp on every row",
        )
    n = len(ordered)
    cut: pd.Timestamp = (
        arrival.iloc[min(int(n * train_fraction), n - 1)] if n else pd.Timestamp(0, tz="UTC")
    )
    train = ordered[arrival < cut]
    heldout = ordered[arrival >= cut]
    if len(train) < min_rows or len(heldout) < min_rows:
        raise InputError(
            f"a {train_fraction:.0%} time split of {n} rows leaves {len(train)} training and "
            f"{len(heldout)} held-out rows",
            field="rows",
            expected=f"at least {min_rows} rows on each side (more telemetry)",
        )
    return TimeSplit(train=train, heldout=heldout, cut=cut)
