"""``placement bench cost-model``: prints the validation table and writes ``{"rows": [...]}``."""

from __future__ import annotations

import json

import pytest
from catalogue_builders import restore_catalogue, write_catalogue
from typer.testing import CliRunner

from placement.cli import app
from placement.paths import shared_data
from sim.costmodel.transfer import FAMILIES
from sim.costmodel.validate import SPLITWISE_CSV

__all__ = ["restore_catalogue"]
pytestmark = pytest.mark.skipif(
    not (shared_data() / SPLITWISE_CSV).exists(), reason="shared data missing"
)


def test_cli_writes_rows(tmp_path):
    out = tmp_path / "cost_model.json"
    result = CliRunner().invoke(app, ["bench", "cost-model", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    rows = payload["rows"]
    keys = {"hardware", "model", "phase", "source", "median_ape", "p90_ape", "n"}
    assert rows and all(keys <= set(r) for r in rows)
    assert {r["source"] for r in rows} == {"splitwise", "llm_inference_bench"}
    assert "median_ape" in result.output
    # the simulator's default view: GH200 (datasheet kernels) under its own handful fit
    default = [r for r in rows if r["default"]]
    assert default and {r["hardware"] for r in default} == {"GH200"}
    assert all(r["timing_source"] == "end-to-end fit" and r["n"] > 0 for r in default)
    # leave one accelerator out: every family of B200 on all rows and on model shapes
    loo = payload["leave_one_out"]
    assert {(r["family"], r["rows"]) for r in loo} == {
        (f, rows_) for f in FAMILIES for rows_ in ("all", "model shapes")
    }
    assert all(r["accelerator"] == "B200" and 0 < r["median_ape"] < 1 for r in loo)
    assert all(r["capacity_error"] is not None for r in loo)
    assert "A100-80G" in loo[0]["fitted_on"] and "B200" not in loo[0]["fitted_on"]
    assert payload["leave_one_out_capacity"]
    assert set(payload["fidelity"]) == {"profiles", "end-to-end fit", "roofline only"}


@pytest.mark.usefixtures("restore_catalogue")
def test_profiles_flag_adds_a_kind_and_the_output_says_where_timings_come_from(tmp_path):
    out = tmp_path / "cost_model.json"
    folder = write_catalogue(tmp_path / "mine")
    result = CliRunner().invoke(
        app, ["bench", "cost-model", "--quick", "--profiles", str(folder), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    sources = {s["accelerator"]: s for s in json.loads(out.read_text())["timing_sources"]}
    assert sources["MI355X"]["source"] == "roofline only"
    assert sources["H100-SXM"]["source"] == "profiles"
    assert "timings come from" in result.output


def test_a_missing_profiles_folder_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(app, ["bench", "cost-model", "--profiles", str(tmp_path / "no")])
    assert result.exit_code == 2
    assert "--profiles" in result.output and "Traceback" not in result.output
