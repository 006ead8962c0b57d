"""Shared fixtures: telemetry of two short simulator runs and a predictor fitted on its head.

The runs (synthetic multi-tenant traffic on the heterogeneous H100/A100/L40S fleet at loads
0.6 and 1.0) take a few seconds together; they are built once per session.
"""

from __future__ import annotations

import pandas as pd
import pytest

from bench.predict_speed import simulated_frame
from models.predictor import LatencyPredictor
from models.quantile import QUANTILES, TARGETS, QuantileConfig, model_name
from placement.domain.fleet import load_fleet
from placement.paths import repo_root

HEAD_SHARE = 0.7


@pytest.fixture(scope="session")
def telemetry() -> pd.DataFrame:
    fleet = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
    frames = [
        simulated_frame(fleet, "synthetic", load=load, span_s=90.0, seed=i)
        for i, load in enumerate((0.6, 1.0))
    ]
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values("arrival_time", kind="stable", ignore_index=True)


@pytest.fixture(scope="session")
def split(telemetry: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(head, held-out tail) of the telemetry by arrival time."""
    cut = int(len(telemetry) * HEAD_SHARE)
    return telemetry.iloc[:cut].reset_index(drop=True), telemetry.iloc[cut:].reset_index(drop=True)


@pytest.fixture(scope="session")
def predictor(split: tuple[pd.DataFrame, pd.DataFrame]) -> LatencyPredictor:
    return LatencyPredictor().fit(split[0])


@pytest.fixture(scope="session")
def monotone_predictor(split: tuple[pd.DataFrame, pd.DataFrame]) -> LatencyPredictor:
    """Fitted with the per-feature monotone constraints on every model (by default only the
    p95s keep them)."""
    every = tuple(model_name(t, a) for t in TARGETS for a in QUANTILES)
    return LatencyPredictor(QuantileConfig(monotone=every)).fit(split[0])
