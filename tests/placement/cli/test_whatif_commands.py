"""``placement whatif``: writes the table, plans and plots; bad input exits 2 naming the field."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from placement.cli import app


def test_writes_table_plans_and_plots(doc: dict[str, Any], write: Any, tmp_path: Path) -> None:
    doc["sweep"] = {
        "name": "h100s",
        "vary": "add_replicas.0.count",
        "values": [1, 2],
        "template": {"add_replicas": [{"accelerator": "H100-SXM", "count": 0}]},
    }
    doc["capacity_question"] = {"candidates": ["H100-SXM", "L40S"]}
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["whatif", str(write(doc)), "--out", str(out), "--local-sync"])
    assert res.exit_code == 0, res.output
    assert "h100s=2" in res.output and "min-cost fleet" in res.output
    with (out / "whatif.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["case"] for r in rows] == ["base", "h100s=1", "h100s=2"]
    assert {
        "cost_per_hour",
        "attainment",
        "attainment:interactive",
        "shed_share",
        "churn",
        "attainment:tenant:tenant-0",
    } <= set(rows[0])
    assert sorted(p.name for p in (out / "plans").iterdir()) == [
        "base.json",
        "h100s=1.json",
        "h100s=2.json",
        "min_cost.json",
    ]
    for png in ("cost_vs_attainment.png", "sweep.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert (out / "whatif.json").exists()


def test_bad_input_exits_2_naming_the_field(
    doc: dict[str, Any], write: Any, tmp_path: Path
) -> None:
    doc["cases"] = [{"name": "c", "add_replicas": [{"accelerator": "Z9000", "count": 1}]}]
    res = CliRunner().invoke(
        app, ["whatif", str(write(doc)), "--out", str(tmp_path / "o"), "--local-sync"]
    )
    assert res.exit_code == 2
    assert "cases.0.add_replicas.0.accelerator" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_the_example_scenarios_load() -> None:
    from placement.paths import repo_root
    from placement.whatif.load import load_scenario

    examples = sorted((repo_root() / "data" / "scenarios").glob("*.yaml"))
    assert len(examples) >= 4
    for path in examples:
        s = load_scenario(path, check=False)  # names are checked by `placement whatif` itself
        assert s.cases[0].name == "base"


def test_an_unknown_attainment_model_exits_2_naming_the_option(
    doc: dict[str, Any], write: Any, tmp_path: Path
) -> None:
    args = ["whatif", str(write(doc)), "--out", str(tmp_path / "o"), "--local-sync"]
    res = CliRunner().invoke(app, [*args, "--attainment", "queue"])
    assert res.exit_code == 2
    assert "--attainment" in res.output and "pooled" in res.output
    assert "Traceback" not in res.output
