"""Bad files given to the CLI or found at start-up: one line naming the file (and the field or
column), exit code 2, never a traceback. Every file here is really written and really broken."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from placement.cli import app
from placement.paths import repo_root
from training.telemetry.schema import REQUESTS_SCHEMA

SPLITWISE_HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,"
    "prompt_time,token_time,e2e_time,tensor_parallel\n"
)
SPLITWISE_ROW = "llama2-70b,a100-80gb,512,1,128,1.0,0.7,196.25,54.88,7168.98,2\n"


def _requests_file(path: Path) -> Path:
    row = {
        "request_id": 1,
        "arrival_time": datetime(2026, 1, 1, tzinfo=UTC),
        "input_tokens": 100,
        "cached_tokens": 0,
        "output_tokens": 10,
        "tenant": "acme",
        "request_class": "interactive",
        "backlog_requests": 0,
        "backlog_prefill_tokens": 0,
        "error": "",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([row], schema=REQUESTS_SCHEMA), path)
    return path


def _one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_show_on_a_truncated_parquet_names_the_file(tmp_path: Path) -> None:
    good = _requests_file(tmp_path / "store/requests/date=2026-01-01/part-a.parquet")
    assert CliRunner().invoke(app, ["telemetry", "show", str(tmp_path / "store")]).exit_code == 0
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(app, ["telemetry", "show", str(tmp_path / "store")])
    assert result.exit_code == 2
    line = _one_line_error(result.output)
    assert str(good) in line and "unreadable telemetry" in line


def test_show_refuses_a_parquet_with_other_columns_naming_the_missing_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store/requests/date=2026-01-01/part-b.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"request_id": [1, 2, 3], "latency": [0.1, 0.2, 0.3]}), path)
    result = CliRunner().invoke(app, ["telemetry", "show", str(tmp_path / "store")])
    assert result.exit_code == 2
    line = _one_line_error(result.output)
    assert str(path) in line
    assert "missing columns arrival_time, first_token_time" in line
    assert "request_id," not in line  # present, so not named


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # cut mid-row: the last line lacks its last columns
        ((SPLITWISE_HEADER + SPLITWISE_ROW * 3 + SPLITWISE_ROW[:30]).encode(), ":5, field"),
        (bytes(range(128, 256)) * 8, "not UTF-8 text"),
        (b"", "empty file"),
        ((SPLITWISE_HEADER + SPLITWISE_ROW.replace(",1,128,", ",one,128,")).encode(), "'one'"),
    ],
    ids=["truncated", "binary", "empty", "not-a-number"],
)
def test_train_refuses_a_bad_measurements_csv(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    csv = tmp_path / "perf.csv"
    csv.write_bytes(content)
    result = CliRunner().invoke(
        app, ["train", "--telemetry", str(tmp_path / "none"), "--measurements", str(csv)]
    )
    assert result.exit_code == 2
    line = _one_line_error(result.output)
    assert str(csv) in line and expected in line


def test_serve_refuses_a_binary_fleet_file(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    result = CliRunner().invoke(app, ["serve", "--dev", "--fleet", str(fleet)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    # --dev first prints its generated key and a curl to try; then the one error line
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and str(fleet) in error[0] and "not UTF-8" in error[0]


def test_serve_refuses_a_tenants_file_over_the_fleet(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("tenants:\n  a: {credit_share: 0.7}\n  b: {credit_share: 0.7}\n")
    fleet = repo_root() / "data/fleets/h100x8.yaml"
    result = CliRunner().invoke(
        app,
        ["serve", "--dev", "--fleet", str(fleet), "--tenants", str(tenants), "--port", "1"],
    )
    assert result.exit_code == 2
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and str(tenants) in error[0] and "sum to 1.4" in error[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("credits", "expected"),
    [("[1, 2, 3]", "holds a list"), ('{"acme": "x"}', "field 'acme'")],
)
def test_service_start_up_refuses_a_damaged_credits_file(
    tmp_path: Path, credits: str, expected: str
) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "credits.json").write_text(credits)
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    env.pop("PLACEMENT_API_KEYS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from placement.cli import app; app()",
            "serve",
            "--dev",
            "--fleet",
            str(repo_root() / "data/fleets/h100x8.yaml"),
            "--plan-dir",
            str(plans),
            "--port",
            str(_free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and str(plans / "credits.json") in error[0] and expected in error[0]
