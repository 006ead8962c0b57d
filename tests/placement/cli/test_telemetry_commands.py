"""``placement telemetry export`` then ``show`` on a one-minute slice of the Mooncake trace."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from placement.cli import app
from placement.paths import shared_data
from training.dataset import build_training_frame
from training.telemetry.store import read_requests, read_samples

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)

EXPORT = [
    "telemetry",
    "export",
    "--workload",
    "mooncake",
    "--fleet",
    "data/fleets/h100x8.yaml",
    "--load",
    "0.8",
    "--duration",
    "60",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("telemetry") / "store"
    result = CliRunner().invoke(app, [*EXPORT, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_export_writes_both_tables_readable_and_joinable(store):
    requests = read_requests(store)
    samples = read_samples(store)
    assert len(requests) > 50
    assert set(samples["replica"]) == {f"h100-{i}" for i in range(8)}
    assert (samples["accelerator"] == "H100-SXM").all()
    assert requests["arrival_time"].min().isoformat() == "2026-01-01T00:00:00+00:00"
    frame = build_training_frame(requests, samples)
    assert len(frame) + sum(frame.attrs["excluded"].values()) == len(requests)


def test_show_counts_rows_per_table_and_day(store):
    result = CliRunner().invoke(app, ["telemetry", "show", str(store)])
    assert result.exit_code == 0, result.output
    n_requests = len(read_requests(store))
    line = next(x for x in result.output.splitlines() if "requests" in x and "2026-01-01" in x)
    assert f" {n_requests} " in line
    assert "replica_samples" in result.output


def test_a_second_export_into_the_same_window_is_refused(store):
    result = CliRunner().invoke(app, [*EXPORT, "--out", str(store)])
    assert result.exit_code == 2
    assert "overlaps" in result.output and "--start" in result.output


def test_a_later_start_appends_a_second_day(store):
    result = CliRunner().invoke(
        app, [*EXPORT, "--out", str(store), "--start", "2026-01-02T00:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    days = read_requests(store)["arrival_time"].dt.strftime("%Y-%m-%d")
    assert set(days) == {"2026-01-01", "2026-01-02"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["telemetry", "show", "{tmp}/no/such/store"], "does not exist"),
        (["telemetry", "export", "--out", "{tmp}/s", "--start", "2026-01-01"], "--start"),
        (
            ["telemetry", "export", "--out", "{tmp}/s", "--policy", "nope", "--duration", "5"],
            "nope",
        ),
    ],
)
def test_bad_arguments_give_one_line_errors(args, message, tmp_path):
    result = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()


def test_a_clone_not_beside_the_shared_data_is_told_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_SHARED_DATA", str(tmp_path / "nowhere"))
    result = CliRunner().invoke(
        app, ["telemetry", "export", "--out", str(tmp_path / "s"), "--duration", "5"]
    )
    assert result.exit_code == 2
    assert "PLACEMENT_SHARED_DATA" in result.output
    assert "Traceback" not in result.output
