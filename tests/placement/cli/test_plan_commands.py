from __future__ import annotations

from pathlib import Path

import pytest
from plan_builders import make_plan
from typer.testing import CliRunner

from placement.cli import app

runner = CliRunner()


def test_unknown_fleet_file_exits_2_naming_it(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "plan",
            "solve",
            "--fleet",
            str(tmp_path / "nope.yaml"),
            "--workload",
            "synthetic",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 2
    assert "nope.yaml" in res.output and "cannot read fleet file" in res.output


def test_bad_plan_json_exits_2_naming_the_field(tmp_path: Path) -> None:
    p = tmp_path / "plan.json"
    p.write_text(make_plan().to_json().replace('"objective":1.0', '"objective":"high"'))
    res = runner.invoke(app, ["plan", "show", str(p)])
    assert res.exit_code == 2 and "solver.objective" in res.output
    p.write_text("{not json")
    res = runner.invoke(app, ["plan", "validate", str(p)])
    assert res.exit_code == 2 and "not valid JSON" in res.output


def test_validate_and_diff_commands(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(make_plan().to_json())
    b.write_text(make_plan(**{"version": 2, "replicas.0.planned_rps": 11.0}).to_json())
    assert runner.invoke(app, ["plan", "validate", str(a)]).exit_code == 0
    res = runner.invoke(app, ["plan", "validate", str(b)])
    assert res.exit_code == 2 and "capacity: h100-0" in res.output
    res = runner.invoke(app, ["plan", "diff", str(a), str(b)])
    assert res.exit_code == 0 and "plan 1 → 2" in res.output


def test_solve_with_a_tenants_file_shows_every_tenant_with_credit_and_attainment(
    tmp_path: Path,
) -> None:
    from placement.paths import repo_root
    from placement.plan.store import DirectoryPlanStore

    root = repo_root()
    res = runner.invoke(
        app,
        [
            "plan",
            "solve",
            "--fleet",
            str(root / "data" / "fleets" / "h100x8.yaml"),
            "--workload",
            "synthetic",
            "--window-s",
            "30",
            "--tenants",
            str(root / "data" / "tenants" / "example.yaml"),
            "--out",
            str(tmp_path / "plans"),
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    plan = DirectoryPlanStore(tmp_path / "plans").latest()
    assert plan is not None
    shares = {t.tenant: t.guaranteed_share for t in plan.tenants}
    assert shares == {"acme": 0.5, "globex": 0.3, "initech": 0.1}
    assert all(t.predicted_attainment is not None for t in plan.tenants)
    for tenant in plan.tenants:  # the table names each with its credit and attainment
        assert f"{tenant.tenant}" in res.output and f"{tenant.guaranteed_share:.1%}" in res.output
    assert "predicted" in res.output


def test_plan_solve_runs_on_embedded_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``placement plan solve --tenants data/tenants/example.yaml`` as typed in the repository:
    the shipped fleet and workload, the plan written under ``out/plans``."""
    import shutil

    from placement.paths import repo_root
    from placement.plan.store import DirectoryPlanStore

    root = repo_root()
    (tmp_path / "data").mkdir()
    for folder in ("fleets", "tenants"):
        shutil.copytree(root / "data" / folder, tmp_path / "data" / folder)
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(
        app,
        ["plan", "solve", "--tenants", "data/tenants/example.yaml", "--window-s", "30"],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    plan = DirectoryPlanStore(tmp_path / "out" / "plans").latest()
    assert plan is not None
    assert {t.tenant for t in plan.tenants} == {"acme", "globex", "initech"}
