"""The Azure loaders on the shipped samples, on malformed files, and (when present) in full."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from placement.errors import InputError
from placement.paths import repo_root
from sim.workloads.azure import azure_trace_path, load_azure

SAMPLES = repo_root() / "data/samples/azure"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
ROW = "2023-11-16 18:15:46.6805900,374,44\n"


def sample(kind: str) -> Path:
    return SAMPLES / f"AzureLLMInferenceTrace_{kind}_first300.csv"


@pytest.mark.parametrize("kind", ["conv", "code"])
def test_sample_shape_and_arrivals(kind: str) -> None:
    workload = load_azure(kind, sample(kind))  # type: ignore[arg-type]
    frame = pd.read_csv(sample(kind))
    stamps = pd.to_datetime(frame["TIMESTAMP"])
    expected = (stamps - stamps.iloc[0]).dt.total_seconds().tolist()
    assert len(workload) == 300
    assert [r.id for r in workload.requests] == list(range(300))
    assert workload.requests[0].arrival_s == 0.0
    assert [r.arrival_s for r in workload.requests] == pytest.approx(expected, abs=1e-6)
    assert [r.input_tokens for r in workload.requests] == frame["ContextTokens"].tolist()
    assert [r.output_tokens for r in workload.requests] == frame["GeneratedTokens"].tolist()
    assert all(r.block_hashes == () for r in workload.requests)
    assert all(r.model == "" and r.tenant == f"azure-{kind}" for r in workload.requests)


def test_seven_fractional_digits_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        HEADER + "2023-11-16 18:15:46.0000000,1,1\n" + "2023-11-16 18:15:46.0000003,1,1\n"
    )
    workload = load_azure("conv", path)
    assert workload.requests[1].arrival_s == pytest.approx(3e-7, abs=1e-12)


def test_unsorted_rows_are_sorted_stably(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        HEADER
        + "2023-11-16 18:00:05.0,10,1\n"
        + "2023-11-16 18:00:01.0,20,1\n"
        + "2023-11-16 18:00:01.0,30,1\n"
    )
    workload = load_azure("code", path)
    assert [r.input_tokens for r in workload.requests] == [20, 30, 10]
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.0, 4.0]


@pytest.mark.parametrize(
    ("bad_row", "field"),
    [
        ("2023-11-16 18:15:4x.1,374,44\n", "TIMESTAMP"),
        ("2023-13-16 18:15:46.1,374,44\n", "TIMESTAMP"),
        ("2023-11-16 18:15:46.1,many,44\n", "ContextTokens"),
        ("2023-11-16 18:15:46.1,374,-2\n", "GeneratedTokens"),
        ("2023-11-16 18:15:46.1,374\n", None),
    ],
)
def test_malformed_row_names_the_file_line(tmp_path: Path, bad_row: str, field: str | None) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + ROW + "\n" + bad_row + ROW)  # a blank line 3: the bad row is line 4
    with pytest.raises(InputError) as caught:
        load_azure("conv", path)
    assert caught.value.line == 4
    assert f"{path}:4" in str(caught.value)
    assert caught.value.field == field


def test_missing_column_is_reported_on_the_header(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.1,374\n")
    with pytest.raises(InputError) as caught:
        load_azure("conv", path)
    assert (caught.value.line, caught.value.field) == (1, "GeneratedTokens")


def test_unknown_kind_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="conv or code"):
        load_azure("chat")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"absent\.csv"):
        load_azure("conv", tmp_path / "absent.csv")


@pytest.mark.skipif(not azure_trace_path("conv").exists(), reason="no shared data")
def test_full_traces() -> None:
    conv, code = load_azure("conv"), load_azure("code")
    assert (len(conv), len(code)) == (19366, 8819)
    assert 3400 < conv.duration_s < 3600
    assert 3400 < code.duration_s < 3600
