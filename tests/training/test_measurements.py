"""Measured rows from outside the telemetry: Splitwise's profile as predictor rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.errors import InputError
from placement.paths import shared_data
from training.measurements import load_measurements, splitwise_frame


@pytest.mark.skipif(
    not (shared_data() / "profiles/splitwise").exists(), reason="shared data missing"
)
def test_splitwise_rows_are_idle_llama2_70b_replicas_in_seconds() -> None:
    frame = splitwise_frame()
    # 105 rows per (hardware, TP) for TP 2/4/8 on A100 and H100 (power-capped rows excluded)
    assert len(frame) == 6 * 105
    assert set(frame["accelerator"]) == {"A100-80G", "H100-SXM"}
    assert (frame["num_requests_waiting"] == 0).all()
    assert (frame["uncached_tokens"] == frame["input_tokens"]).all()
    # the batch's other prompts are the router's backlog; a lone prompt has none
    others = frame["num_requests_running"] - 1
    assert (frame["backlog_requests"] == others).all()
    assert (frame["backlog_prefill_tokens"] == others * frame["input_tokens"]).all()
    assert (frame.loc[frame["num_requests_running"] == 1, "backlog_prefill_tokens"] == 0).all()
    assert frame["tpot_s"].between(0.005, 1.0).all()  # token_time was in ms


def test_a_csv_without_a_column_is_refused_naming_it(tmp_path: Path) -> None:
    csv = tmp_path / "perf.csv"
    csv.write_text("model,hardware,tensor_parallel,prompt_size,batch_size,token_size,prompt_time\n")
    with pytest.raises(InputError) as err:
        load_measurements(str(csv))
    assert err.value.field == "token_time"
    assert str(csv) in str(err.value)


def test_an_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read measurements"):
        load_measurements(str(tmp_path / "absent.csv"))


def test_a_truncated_csv_names_the_line_and_column(tmp_path: Path) -> None:
    csv = tmp_path / "perf.csv"
    header = (
        "model,hardware,tensor_parallel,prompt_size,batch_size,token_size,prompt_time,token_time"
    )
    row = "llama2-70b,a100-80gb,2,512,1,128,196.2,54.8"
    csv.write_text(f"{header}\n{row}\n\n{row}\n{row[:25]}")  # a blank line, then a cut row
    with pytest.raises(InputError) as err:
        load_measurements(str(csv))
    assert err.value.line == 5
    assert err.value.field == "batch_size"  # the first column the cut row lacks
    assert "truncated" in str(err.value)


def test_a_binary_csv_is_an_input_error(tmp_path: Path) -> None:
    csv = tmp_path / "perf.csv"
    csv.write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(InputError, match="not UTF-8"):
        load_measurements(str(csv))
