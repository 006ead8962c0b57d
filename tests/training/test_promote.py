"""Promotion: the first version becomes champion; a worse one is refused with the numbers; an
equally good one is promoted; the planner loads whatever holds the alias."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from registry_builders import shared_traces_present

from models.predictor import LatencyPredictor
from placement.errors import InputError, PredictorUnavailable
from training.promote import compare, load_champion, promote
from training.tracking import CHAMPION, LATENCY_MODEL, THROUGHPUT_MODEL, TRACKING_URI_ENV
from training.train import train

pytestmark = pytest.mark.skipif(not shared_traces_present(), reason="shared data missing")


@pytest.fixture(scope="module")
def store(telemetry_store: Path) -> Path:
    return telemetry_store


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MlflowClient:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv(TRACKING_URI_ENV, uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _champion(client: MlflowClient, name: str = LATENCY_MODEL) -> str:
    return str(client.get_model_version_by_alias(name, CHAMPION).version)


def test_promotion_sequence(store: Path, tracking: MlflowClient) -> None:
    with pytest.raises(PredictorUnavailable, match="champion"):
        load_champion()

    first = train(store, experiment="promote")
    decision = promote(str(first.latency_version))
    assert decision.promoted
    assert "no champion yet" in decision.reason
    assert _champion(tracking) == "1"
    assert _champion(tracking, THROUGHPUT_MODEL) == "1"
    champion = load_champion()
    assert isinstance(champion.predictor, LatencyPredictor)
    assert champion.source == f"models:/{LATENCY_MODEL}/1 (@{CHAMPION})"

    # trained on the first 20% only: its held-out part is the last 80%, part of which the
    # champion trained on, so the champion can only look better there
    worse = train(store, experiment="promote", train_fraction=0.2)
    decision = promote(str(worse.latency_version))
    assert not decision.promoted
    assert "mape_p50" in decision.reason or "coverage_p95" in decision.reason
    assert decision.champion_version == "1"
    assert _champion(tracking) == "1"

    # the same recipe again scores the same: at least as good, so it is promoted
    again = train(store, experiment="promote")
    decision = promote(str(again.latency_version))
    assert decision.promoted, decision.reason
    assert decision.candidate["ttft.mape_p50"] == pytest.approx(decision.champion["ttft.mape_p50"])
    assert _champion(tracking) == str(again.latency_version)
    assert _champion(tracking, THROUGHPUT_MODEL) == str(again.throughput_version)
    assert load_champion().version == str(again.latency_version)


def test_unknown_candidate_version_is_an_input_error(tracking: MlflowClient) -> None:
    with pytest.raises(InputError, match="no version 42"):
        promote("42")


def _scores(ttft_mape: float, tpot_mape: float, coverage: float) -> dict[str, float]:
    return {
        "ttft.mape_p50": ttft_mape,
        "tpot.mape_p50": tpot_mape,
        "ttft.coverage_p95": coverage,
        "tpot.coverage_p95": coverage,
    }


@pytest.mark.parametrize(
    ("candidate", "failing"),
    [
        (_scores(0.20, 0.10, 0.95), []),
        (_scores(0.203, 0.10, 0.95), []),  # within the 2% tolerance
        (_scores(0.25, 0.10, 0.95), ["ttft.mape_p50"]),
        (_scores(0.20, 0.15, 0.95), ["tpot.mape_p50"]),
        (_scores(0.20, 0.10, 0.80), ["ttft.coverage_p95", "tpot.coverage_p95"]),
        (_scores(0.20, 0.10, 0.91), []),  # inside the band even if the champion is closer
    ],
)
def test_compare_names_each_failed_check(candidate: dict[str, float], failing: list[str]) -> None:
    champion = _scores(0.20, 0.10, 0.95)
    failures = compare(candidate, champion)
    assert [f.split()[0] for f in failures] == failing
