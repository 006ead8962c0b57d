"""`placement bench predictors --quick`: every split reported, in the issue's JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bench.predictors import splitwise_frame
from placement.cli import app


def test_quick_bench_writes_rows_for_every_split(tmp_path: Path) -> None:
    out = tmp_path / "predictors.json"
    outcome = CliRunner().invoke(app, ["bench", "predictors", "--quick", "--out", str(out)])
    assert outcome.exit_code == 0, outcome.output
    rows = json.loads(out.read_text())["rows"]
    splits = {row["split"] for row in rows}
    assert splits == {"heldout", "splitwise", "leave_out:A100-80G", "leave_out:L40S"}
    for row in rows:
        assert set(row) == {"target", "quantile", "split", "mape", "coverage", "n"}
        assert row["target"] in {"ttft", "tpot", "throughput"}
        assert row["n"] > 0
        if row["quantile"] == 0.95:
            assert 0.0 <= row["coverage"] <= 1.0
        else:
            assert row["mape"] >= 0.0


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
