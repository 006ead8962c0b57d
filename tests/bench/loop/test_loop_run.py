from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.loop.report import run_loop_bench
from bench.loop.run import Case, knee, ratio_load
from bench.loop.tuning import Setting
from placement.cli import app
from placement.domain.fleet import load_fleet
from placement.paths import repo_root
from sim.workloads.registry import load_workload


def _rows(points: list[tuple[float, float]]) -> list[dict[str, float]]:
    return [{"load": x, "slo_attainment": a, "goodput_rps": x * a} for x, a in points]


def test_knee_interpolates_where_attainment_crosses_ninety_percent() -> None:
    rows = _rows([(0.5, 0.99), (1.0, 0.95), (1.5, 0.85)])
    assert knee(rows) == pytest.approx(1.25)
    assert ratio_load(rows) == 1.5
    assert ratio_load(_rows([(1.0, 0.95)])) is None
    assert knee(_rows([(0.5, 0.5)])) == 0.0


def test_a_small_case_runs_end_to_end(tmp_path: Path) -> None:
    case = Case(
        workload=load_workload("synthetic", duration_s=60.0),
        fleet=load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml"),
        peers=("round_robin",),
        loads=(1.0, 3.0),
        period_s=10.0,
        learn=False,
        settings=(Setting(4.0, 0.5, 1.0), Setting(1.0, 2.0, 1.5)),
    )
    payload = run_loop_bench([case], out=tmp_path / "loop.json", store=tmp_path / "store")
    (summary,) = payload["summary"]
    out = payload
    policies = {r["policy"] for r in out["runs"]}
    assert {"round_robin", "placement", "ours:fallbacks_only", "ours:no_admission"} <= policies
    assert summary["capacity_source"] == "roofline-prior"
    assert summary["lost_requests"] == 0
    if summary["ratio_vs_best_peer"] is not None:  # no policy beats the fluid bound
        assert summary["ratio_vs_best_peer"] <= summary["ratio_ceiling"] + 1e-9
    assert 0 < summary["jain_overload"] <= 1
    # re-solves happened inside the runs, each one recorded
    assert any(s["reason"] == "period" for s in out["solves"])
    ours = [r for r in out["runs"] if r["policy"] == "placement"]
    assert all(r["share_of_bound"] > 0 for r in ours)
    assert summary["failures"]["killed"] == "h100-0"
    assert (tmp_path / "loop.json").exists()
    assert len(payload["plots"]) == 3 and all(Path(p).exists() for p in payload["plots"])
    assert summary["route_profile"].startswith("scored-p")
    assert set(summary["targets_met"]) >= {"ratio_vs_best_peer", "lost_requests"}
    # the gate judged in shadow at every swept load and at overload
    assert set(summary["gate_by_load"]) >= {"1.0", "3.0"}
    assert any(k.startswith("overload") for k in summary["gate_by_load"])
    for quality in summary["gate_by_load"].values():
        assert (
            sum(b["requests"] for b in quality["by_prompt_bucket"].values()) == quality["requests"]
        )
    assert summary["gate_precision"] is None or 0 <= summary["gate_precision"] <= 1
    assert summary["ablations"]["plan_gain"] == summary["ablations"]["ours:fallbacks_only"] > 0
    assert all("gate_precision" in r for r in ours)


def test_cli_names_a_bad_workload() -> None:
    result = CliRunner().invoke(app, ["bench", "loop", "--workloads", "nope", "--out", "x.json"])
    assert result.exit_code == 2
    assert "--workloads" in result.output
