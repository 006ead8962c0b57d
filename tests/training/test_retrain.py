"""Retraining without a person: the first candidate becomes champion, a candidate scored on
the same held-out rows as the champion is promoted only if at least as good; the CLI says
which."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from placement.cli import app
from placement.errors import InputError
from placement.paths import shared_data
from training.retrain import retrain
from training.tracking import CHAMPION, LATENCY_MODEL, TRACKING_URI_ENV
from training.train import latest_window

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)


@pytest.fixture
def store(telemetry_store: Path) -> Path:
    return telemetry_store


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MlflowClient:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv(TRACKING_URI_ENV, uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_retrain_makes_a_champion_then_promotes_only_what_is_as_good(
    store: Path, tracking: MlflowClient
) -> None:
    first = retrain(store, window_s=None, experiment="retrain")
    assert first.decision.promoted and "no champion yet" in first.decision.reason
    champion = str(tracking.get_model_version_by_alias(LATENCY_MODEL, CHAMPION).version)
    assert champion == first.trained.latency_version

    # the CLI on the last 60 s only: a smaller candidate, scored on the same later rows as
    # the champion; the alias moves only if the CLI says it promoted
    result = CliRunner().invoke(
        app, ["retrain", "--telemetry", str(store), "--window-hours", str(60 / 3600)]
    )
    assert result.exit_code == 0, result.output
    said = result.output.strip().splitlines()[-1]
    now = str(tracking.get_model_version_by_alias(LATENCY_MODEL, CHAMPION).version)
    if said.startswith("promoted"):
        assert now != champion and "at least as good" in said
    else:
        assert said.startswith("kept the champion")
        assert now == champion and "worse than" in said


def test_latest_window_keeps_the_last_seconds() -> None:
    t0 = pd.Timestamp("2026-01-01T00:00:00Z")
    frame = pd.DataFrame({"arrival_time": [t0 + pd.Timedelta(seconds=s) for s in range(100)]})
    assert len(latest_window(frame, 10.0)) == 11
    assert len(latest_window(frame, None)) == 100
    with pytest.raises(InputError, match="window_s"):
        latest_window(frame, 0.0)
