"""`placement bench predict-speed`: times predict() and writes the issue's JSON keys."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bench.predict_speed import default_training_frame, run_predict_speed
from models.predictor import LatencyPredictor
from placement.cli import app


def test_command_writes_rows_and_timings(tmp_path: Path) -> None:
    out = tmp_path / "speed.json"
    outcome = CliRunner().invoke(
        app, ["bench", "predict-speed", "--rows", "500", "--repeats", "3", "--out", str(out)]
    )
    assert outcome.exit_code == 0, outcome.output
    payload = json.loads(out.read_text())
    assert payload["rows"] == 500
    assert 0 < payload["median_ms"] <= payload["p90_ms"]
    assert set(payload["trees"]) == {"ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95"}


def test_a_saved_model_is_timed_as_loaded(tmp_path: Path) -> None:
    frame = default_training_frame()
    LatencyPredictor().fit(frame).save(tmp_path / "model")
    payload = run_predict_speed(rows=100, repeats=2, model_dir=tmp_path / "model")
    assert payload["model"] == str(tmp_path / "model")


def test_a_missing_model_directory_is_a_one_line_error(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(
        app, ["bench", "predict-speed", "--model", str(tmp_path / "nope"), "--rows", "10"]
    )
    assert outcome.exit_code == 2
    assert "manifest.json" in outcome.output
