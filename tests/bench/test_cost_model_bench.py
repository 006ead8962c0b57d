"""``placement bench cost-model``: prints the validation table and writes ``{"rows": [...]}``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placement.cli import app
from placement.paths import shared_data
from sim.costmodel.validate import SPLITWISE_CSV

pytestmark = pytest.mark.skipif(
    not (shared_data() / SPLITWISE_CSV).exists(), reason="shared data missing"
)


def test_cli_writes_rows(tmp_path):
    out = tmp_path / "cost_model.json"
    result = CliRunner().invoke(app, ["bench", "cost-model", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["rows"]
    keys = {"hardware", "model", "phase", "source", "median_ape", "p90_ape", "n"}
    assert rows and all(keys <= set(r) for r in rows)
    assert {r["source"] for r in rows} == {"splitwise", "llm_inference_bench"}
    assert "median_ape" in result.output
