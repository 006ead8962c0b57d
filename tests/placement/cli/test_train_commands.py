"""``placement train`` and ``placement models list`` as a user reads them: the champion's alias
beside its version, each model with its own metrics, tables that fit the terminal without an
ellipsis, and a baseline row only when it has figures."""

from __future__ import annotations

import io
import re

import pytest
from registry_builders import TRAIN_COLUMNS, Registry, shared_traces_present
from rich.console import Console
from typer.testing import CliRunner

from placement.cli import app
from placement.cli.train import LATENCY_METRICS, print_accuracy
from training.tracking import LATENCY_MODEL, THROUGHPUT_MODEL, TRACKING_URI_ENV
from training.train import TrainResult

needs_data = pytest.mark.skipif(not shared_traces_present(), reason="shared data missing")


def _models_list(registry: Registry, monkeypatch: pytest.MonkeyPatch, columns: int) -> str:
    monkeypatch.setenv(TRACKING_URI_ENV, registry.uri)
    outcome = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": str(columns)})
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def _section(output: str, start: str, end: str | None = None) -> str:
    """The lines of ``output`` from the one naming ``start`` up to the one naming ``end``."""
    tail = output[output.index(start) :]
    return tail if end is None else tail[: tail.index(end)]


@needs_data
def test_models_list_shows_the_champion_alias_beside_its_version(
    champion_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = _models_list(champion_registry, monkeypatch, 120)
    for name in (LATENCY_MODEL, THROUGHPUT_MODEL):
        rows = [ln for ln in _section(output, name).splitlines() if ln.startswith("│")]
        assert re.match(r"│ 1 @champion\s+│ \d{4}-\d\d-\d\d\s+│ [0-9a-f]{8} │", rows[0]), output


@needs_data
def test_models_list_gives_each_model_only_its_own_metrics(
    champion_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = _models_list(champion_registry, monkeypatch, 120)
    latency = _section(output, LATENCY_MODEL, THROUGHPUT_MODEL)
    throughput = _section(output, THROUGHPUT_MODEL)
    for target in ("ttft.", "tpot."):
        assert target in latency and target not in throughput
    assert "throughput." in throughput and "throughput." not in latency
    assert re.search(r"│\s+\d\.\d{3} │", throughput)  # its MAPE, not a dash


@needs_data
@pytest.mark.parametrize("columns", [80, 60])
def test_models_list_fits_the_terminal_without_an_ellipsis(
    champion_registry: Registry, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    output = _models_list(champion_registry, monkeypatch, columns)
    assert "…" not in output
    assert max(len(line) for line in output.splitlines()) <= columns
    assert "1 @champion" in output.replace("\n", " ") or "@champi" in output
    if columns == 80:  # whole metric names, the run ids dropped to make room, and said so
        assert "coverage_p95" in output and "mape_p50" in output
        assert "run ids left out to fit 80 columns" in output


@needs_data
def test_train_prints_a_table_that_fits_with_a_full_baseline_row(
    champion_registry: Registry,
) -> None:
    output = champion_registry.train.output
    assert "…" not in output
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= TRAIN_COLUMNS
    assert all(key.split(".")[1] in output for key in LATENCY_METRICS)
    baseline = [ln for ln in lines if "baseline" in ln]
    assert len(baseline) == 1  # one row: its label does not wrap onto an empty second row
    assert re.match(r"│ roofline baseline\s+(│\s+\d\.\d{3} ){4}│", baseline[0]), output
    assert re.search(rf"{THROUGHPUT_MODEL} v1: throughput\.mape \d\.\d{{3}}", output)


def _result(metrics: dict[str, float]) -> TrainResult:
    return TrainResult(run_id="r1", latency_version="7", throughput_version="7", metrics=metrics)


def test_a_baseline_without_figures_is_no_row_but_a_reason() -> None:
    console = Console(width=80, record=True, file=io.StringIO())
    print_accuracy(console, _result({k: 0.5 for k in LATENCY_METRICS}))
    text = console.export_text()
    assert "│ roofline baseline" not in text
    assert "no roofline baseline row" in text
    assert "no throughput.mape" in text


def test_a_scored_baseline_is_a_row() -> None:
    scores = {k: 0.5 for k in LATENCY_METRICS}
    console = Console(width=60, record=True, file=io.StringIO())
    print_accuracy(
        console,
        _result(scores | {f"baseline.{k}": 0.25 for k in scores} | {"throughput.mape": 0.1}),
    )
    text = console.export_text()
    assert "…" not in text
    assert text.count("0.250") == 4
    assert "no roofline baseline" not in text
    assert f"{THROUGHPUT_MODEL} v7: throughput.mape 0.100" in text
