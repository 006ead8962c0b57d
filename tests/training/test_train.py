"""A training run on a short simulated telemetry store, logged to a throw-away MLflow store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from registry_builders import Registry, shared_traces_present
from typer.testing import CliRunner

from models.features import INPUT_COLUMNS
from placement.cli import app
from training.split import split_by_time
from training.tracking import LATENCY_MODEL, THROUGHPUT_MODEL, TRACKING_URI_ENV
from training.train import frame_digest, load_frame

pytestmark = pytest.mark.skipif(not shared_traces_present(), reason="shared data missing")


@pytest.fixture(scope="module")
def store(telemetry_store: Path) -> Path:
    return telemetry_store


@pytest.fixture(scope="module")
def trained(champion_registry: Registry) -> dict[str, Any]:
    """`placement train` once into a SQLite store of its own (the session's registry); the
    CLI's output and a client."""
    uri = champion_registry.uri
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    return {"outcome": champion_registry.train, "client": client, "uri": uri}


def _run(client: MlflowClient) -> Any:
    experiment = client.get_experiment_by_name("test")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return runs[0]


def test_cli_reports_the_registered_versions(trained: dict[str, Any]) -> None:
    outcome = trained["outcome"]
    assert outcome.exit_code == 0, outcome.output
    assert "placement-latency v1" in outcome.output
    assert "placement-throughput v1" in outcome.output


def test_run_holds_heldout_metrics_overall_per_accelerator_and_for_the_baseline(
    trained: dict[str, Any],
) -> None:
    metrics = _run(trained["client"]).data.metrics
    for target in ("ttft", "tpot"):
        assert metrics[f"{target}.mape_p50"] > 0
        assert 0 <= metrics[f"{target}.coverage_p95"] <= 1
        assert metrics[f"{target}.pinball_p95"] > 0
        assert f"{target}.H100-SXM.mape_p50" in metrics
        assert f"baseline.{target}.mape_p50" in metrics
    assert "throughput.mape" in metrics


def test_heldout_tags_identify_the_later_rows(trained: dict[str, Any], store: Path) -> None:
    tags = _run(trained["client"]).data.tags
    split = split_by_time(load_frame(store), 0.7)
    assert tags["heldout.digest"] == frame_digest(split.heldout)
    assert int(tags["heldout.rows"]) == len(split.heldout)
    assert tags["heldout.start"] > tags["train.end"]
    assert tags["telemetry.path"] == str(store.resolve())


def test_plots_and_both_models_are_logged_and_registered(trained: dict[str, Any]) -> None:
    client: MlflowClient = trained["client"]
    run = _run(client)
    plots = {Path(f.path).name for f in client.list_artifacts(run.info.run_id, "plots")}
    assert plots == {"predicted_vs_actual.png", "error_by_load.png"}
    for name in (LATENCY_MODEL, THROUGHPUT_MODEL):
        version = client.get_model_version(name, "1")
        assert version.run_id == run.info.run_id


def test_registered_pyfunc_loads_and_predicts_with_its_signature(
    trained: dict[str, Any], store: Path
) -> None:
    mlflow.set_tracking_uri(trained["uri"])
    mlflow.set_registry_uri(trained["uri"])
    rows = load_frame(store)[list(INPUT_COLUMNS)].head(25)
    latency_model = mlflow.pyfunc.load_model(f"models:/{LATENCY_MODEL}/1")
    assert latency_model.metadata.signature is not None
    predicted = latency_model.predict(rows)
    assert list(predicted.columns) == ["ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95"]
    assert len(predicted) == len(rows)
    assert (predicted["ttft_p95"] >= predicted["ttft_p50"]).all()
    assert (predicted["tpot_p50"] > 0).all()
    throughput = mlflow.pyfunc.load_model(f"models:/{THROUGHPUT_MODEL}/1").predict(rows)
    assert list(throughput.columns) == ["throughput_tok_s"]
    assert (throughput["throughput_tok_s"] >= 0).all()


def test_missing_telemetry_folder_exits_2_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACKING_URI_ENV, f"sqlite:///{tmp_path / 'mlflow.db'}")
    missing = tmp_path / "no-such-store"
    outcome = CliRunner().invoke(app, ["train", "--telemetry", str(missing)])
    assert outcome.exit_code == 2
    assert str(missing) in outcome.output


def test_measured_rows_are_logged_as_parameters(trained: dict[str, Any]) -> None:
    params = _run(trained["client"]).data.params
    assert params["measurements"] == "splitwise"
    assert int(params["measured_rows"]) == 630


def test_unreadable_measurements_exit_2_naming_the_file(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACKING_URI_ENV, f"sqlite:///{tmp_path / 'mlflow.db'}")
    missing = tmp_path / "perf.csv"
    outcome = CliRunner().invoke(
        app, ["train", "--telemetry", str(store), "--measurements", str(missing)]
    )
    assert outcome.exit_code == 2
    assert str(missing) in outcome.output


def test_training_logs_both_models_as_code_without_an_mlflow_warning(
    trained: dict[str, Any],
) -> None:
    outcome = trained["outcome"]
    # MLflow warned on every run that the pickled python_model ran arbitrary code on load
    assert "WARNING" not in outcome.output
    assert "CloudPickle" not in outcome.output
    mlflow.set_tracking_uri(trained["uri"])
    mlflow.set_registry_uri(trained["uri"])
    for name in (LATENCY_MODEL, THROUGHPUT_MODEL):
        flavor = mlflow.models.get_model_info(f"models:/{name}/1").flavors["python_function"]
        assert flavor["loader_module"] == "mlflow.pyfunc.loaders.code_model"
