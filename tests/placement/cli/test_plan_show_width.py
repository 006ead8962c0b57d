"""``placement plan show`` in a narrow terminal folds cells: no replica id or header is cut to
an ellipsis."""

from __future__ import annotations

from pathlib import Path

from plan_builders import make_plan
from typer.testing import CliRunner

from placement.cli import app


def test_plan_show_folds_instead_of_cutting(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(make_plan(capacity_source="models:/placement-latency/3 (@champion)").to_json())
    outcome = CliRunner().invoke(app, ["plan", "show", str(path)], env={"COLUMNS": "50"})
    assert outcome.exit_code == 0, outcome.output
    assert "…" not in outcome.output
    assert max(len(line) for line in outcome.output.splitlines()) <= 50
    assert "(@champion)" in outcome.output  # the version behind the capacities, said
