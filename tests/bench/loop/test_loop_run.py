from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.loop.report import run_loop_bench
from bench.loop.run import Case, audit_load, knee, ratio_load
from bench.loop.tuning import Setting
from placement.cli import app
from placement.domain.fleet import load_fleet
from placement.errors import InputError
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
    # goodput, diagnostics, failures and (the synthetic tenants share prefixes) residency
    assert len(payload["plots"]) == 4 and all(Path(p).exists() for p in payload["plots"])
    assert payload["plots"][-1].endswith("-residency.png")
    assert any(s["residency"] for s in out["solves"])
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
    # with and without the gate at every swept load, and which rule refused
    assert all(r["gate_gain"] > 0 and r["goodput_without_gate_rps"] >= 0 for r in ours)
    assert summary["gate_gain_min"] == min(summary["gate_gain_by_load"].values())
    assert all("by_rule" in q for q in summary["gate_by_load"].values())
    # the audit runs at the swept load where the shadow's precision is worst, if any
    audit = summary["gate_audit"]
    assert (audit is None) == (audit_load(summary["gate_by_load"]) is None)
    if audit is not None:
        assert audit["load"] in (1.0, 3.0)
        assert audit["precision"] is None or 0 <= audit["precision"] <= 1
        assert summary["gate_precision_audited"] == audit["precision"]
        assert sum(b["refused"] for b in audit["by_chance"].values()) == audit["audited"]


def test_the_audit_goes_to_the_worst_swept_load_with_enough_refusals() -> None:
    def q(precision: float | None, refused: int) -> dict[str, Any]:
        return {"precision": precision, "refused": refused}

    by_load = {
        "1.0": q(0.9, 40),
        "2.0": q(0.5, 19),  # too few refusals to count
        "3.0": q(0.7, 25),
        "overload 6": q(0.1, 500),  # the overload is not a swept load
    }
    assert audit_load(by_load) == 3.0
    assert audit_load({"1.0": q(None, 0)}) is None


def test_cli_names_a_bad_workload() -> None:
    result = CliRunner().invoke(app, ["bench", "loop", "--workloads", "nope", "--out", "x.json"])
    assert result.exit_code == 2
    assert "--workloads" in result.output


@pytest.mark.parametrize(("flag", "offered"), [([], False), (["--offer-credit-reserve"], True)])
def test_the_loop_offers_the_credit_reserve_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: list[str], offered: bool
) -> None:
    import bench.loop.report

    seen: list[bool] = []

    def fake_run(cases: list[Case], **_: Any) -> None:
        seen.extend(c.offer_credit_reserve for c in cases)

    monkeypatch.setattr(bench.loop.report, "run_loop_bench", fake_run)
    fleet = str(repo_root() / "data" / "fleets" / "h100x8.yaml")
    args = ["bench", "loop", "--workloads", "synthetic", "--fleet", fleet, "--duration", "30"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "x.json"), *flag])
    assert result.exit_code == 0, result.output
    assert seen == [offered]


def test_a_trace_file_with_a_tenants_file_becomes_one_case_per_fleet() -> None:
    from bench.loop.cases import build_cases

    root = repo_root()
    cases = build_cases(
        workloads="ignored",
        fleets=f"{root}/data/fleets/h100x8.yaml,{root}/data/fleets/hetero.yaml",
        trace=root / "data" / "samples" / "mooncake" / "conversation_trace_first300.jsonl",
        tenants=root / "data" / "tenants" / "example.yaml",
        loads=(1.0,),
        peers=("round_robin",),
        duration_s=None,
        period_s=10.0,
        learn=False,
        seed=3,
    )
    assert [c.fleet.name for c in cases] == ["h100x8", "hetero"]
    workload = cases[0].workload
    assert workload.name == "conversation_trace_first300"
    assert set(workload.tenants) == {"acme", "globex", "initech"}
    assert {r.tenant for r in workload.requests} <= set(workload.tenants)


def test_mixed_takes_another_servegen_population() -> None:
    from bench.loop.cases import build_cases

    (case,) = build_cases(
        workloads="mixed:reason/deepseek-r1",
        fleets=str(repo_root() / "data" / "fleets" / "h100x8.yaml"),
        loads=(1.0,),
        peers=("round_robin",),
        duration_s=120.0,
        period_s=10.0,
        learn=False,
        seed=0,
    )
    tenants = {r.tenant for r in case.workload.requests}
    assert {"azure-conv", "azure-code"} <= tenants
    assert any(t.startswith("servegen-") for t in tenants)


@pytest.mark.parametrize("bad", ["mixed:reason", "mooncake:x/y", "nope"])
def test_bad_workload_names_are_refused(bad: str) -> None:
    from bench.loop.cases import build_cases
    from placement.errors import InputError

    with pytest.raises(InputError, match="--workloads"):
        build_cases(**{**MIXED_CASE, "workloads": bad})


def test_the_same_seed_gives_the_same_figures(tmp_path: Path) -> None:
    def once(where: Path) -> dict[str, object]:
        case = Case(
            workload=load_workload("synthetic", duration_s=40.0, seed=5),
            fleet=load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml"),
            peers=("round_robin",),
            loads=(2.0,),
            period_s=10.0,
            learn=False,
            seed=5,
            settings=(Setting(4.0, 0.5, 1.0),),
        )
        payload = run_loop_bench([case], out=where / "loop.json", store=where / "store")
        return {
            "summary": {k: v for k, v in payload["summary"][0].items() if "wall" not in k},
            "runs": [
                {k: v for k, v in r.items() if "wall" not in k and not k.endswith("_s")}
                for r in payload["runs"]
            ],
        }

    first, second = once(tmp_path / "a"), once(tmp_path / "b")
    assert first["runs"] == second["runs"]
    assert first["summary"]["ratio_vs_best_peer"] == second["summary"]["ratio_vs_best_peer"]
    assert first["summary"]["gate_by_load"] == second["summary"]["gate_by_load"]


def test_the_loops_plans_report_the_attainment_of_the_route_path_that_runs_them() -> None:
    from bench.loop.run import _attainment_of
    from bench.loop.tuning import BASE_PROFILE

    assert _attainment_of(BASE_PROFILE) == "pooled"  # scored: the route path pools
    assert _attainment_of(None) == "replica"  # the weighted lookup follows the split


# a short ``mixed`` case over h100x8, for the tests of what a flag reaches
MIXED_CASE: dict[str, Any] = dict(
    workloads="mixed",
    fleets=str(repo_root() / "data" / "fleets" / "h100x8.yaml"),
    loads=(1.0,),
    peers=("round_robin",),
    duration_s=60.0,
    period_s=10.0,
    learn=False,
    seed=0,
)


def _untuned(case: Any) -> Any:
    """``case``'s context as :func:`bench.loop.run.prepare` starts it: no head tuned, the
    roofline prior's capacity."""
    from bench.loop import run
    from bench.loop.learn import roofline_capacity
    from placement.solver.capacity import class_slos

    wl = case.workload
    return run.CaseContext(
        case=case,
        tune=wl,
        report=wl,
        weights=[1.0],
        capacity=roofline_capacity(class_slos(wl.classes)),
        model_uri="roofline-prior",
    )


@pytest.mark.parametrize(
    ("flag", "attribute"),
    [
        # --gate-pressure-by-model: the overload signals kept per model pool
        ("gate_pressure_by_model", "pressure_by_model"),
        # --gate-tpot-computed: the TPOT forecast in tokens computed
        ("gate_tpot_computed", "tpot_computed"),
    ],
)
def test_a_gate_switch_reaches_ours_gate_only_when_asked(flag: str, attribute: str) -> None:
    """The loop's on/off gate flags reach ours' gate; off by default."""
    from bench.loop import run
    from bench.loop.cases import build_cases

    for asked in (False, True):
        switch: dict[str, Any] = {flag: asked}
        (case,) = build_cases(**MIXED_CASE, **switch)
        assert getattr(case, flag) is asked
        ctx = _untuned(case)
        settings = run._policy_ctx(ctx, run.FULL, 1.0).settings["placement"]
        gate = getattr(settings, "slo_gate", None)
        assert gate is not None and getattr(gate, attribute) is asked


def test_the_gate_holds_tenants_to_a_share_cap_only_when_asked() -> None:
    """``--gate-share-cap`` reaches ours' gate (not the token-charged or credit-less
    ablations, whose credits are not GPU-seconds or none); off by default; a cap under the
    entitlement is refused naming its option."""
    from bench.loop import run
    from bench.loop.cases import build_cases

    for asked in (None, 1.5):
        (case,) = build_cases(**MIXED_CASE, gate_share_cap=asked, gate_share_window_s=20.0)
        assert case.gate_share_cap == asked
        ctx = _untuned(case)
        settings = run._policy_ctx(ctx, run.FULL, 1.0).settings["placement"]
        gate = getattr(settings, "slo_gate", None)
        assert gate is not None and gate.share_cap == asked and gate.share_window_s == 20.0
        tokens = getattr(
            run._policy_ctx(ctx, run.TOKEN_CREDITS, 1.0).settings["placement"], "slo_gate", None
        )
        assert tokens is not None and tokens.share_cap is None
    with pytest.raises(InputError, match="share_cap"):
        build_cases(**MIXED_CASE, gate_share_cap=0.5)


def test_the_gate_gives_slot_turns_beside_the_share_cap_unless_told_not_to() -> None:
    """``--gate-slot-turn-s`` reaches ours' gate settings, :data:`DEFAULT_SLOT_TURN_S` unless
    told otherwise, None with ``--no-slot-turns`` (the gate takes it only beside a share cap,
    :class:`~serving.admission.slo_gate.SloGate`); a wait of 0 is refused naming its option."""
    from bench.loop import run
    from bench.loop.cases import build_cases
    from serving.admission.slo_gate import DEFAULT_SLOT_TURN_S

    (default,) = build_cases(**MIXED_CASE, gate_share_cap=1.5)
    assert default.gate_slot_turn_s == DEFAULT_SLOT_TURN_S
    for asked in (None, 2.0):
        (case,) = build_cases(**MIXED_CASE, gate_share_cap=1.5, gate_slot_turn_s=asked)
        assert case.gate_slot_turn_s == asked
        ctx = _untuned(case)
        settings = run._policy_ctx(ctx, run.FULL, 1.0).settings["placement"]
        gate = getattr(settings, "slo_gate", None)
        assert gate is not None and gate.slot_turn_s == asked and gate.share_cap == 1.5
    with pytest.raises(InputError, match="--gate-slot-turn-s"):
        build_cases(**MIXED_CASE, gate_slot_turn_s=0.0)
