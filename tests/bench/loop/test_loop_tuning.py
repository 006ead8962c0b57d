from __future__ import annotations

from pathlib import Path

from bench.loop.tuning import (
    BASE_PLAN_PICKER,
    HEADROOMS,
    PLAN_PICKER_CHOICES,
    PREFIX_WEIGHTS,
    STRICT_CREDIT_CUT,
    STRICT_OVERLOAD_REFUSE_AT,
    TTFT_WEIGHTS,
    WARM_KV_SHARES,
    Setting,
    gate_variants,
    grid,
    plan_pickers,
    splits_classes,
    write_profile,
)
from placement.solver.instance import WARM_KV_SHARE
from serving.admission.slo_gate import DEFAULT_CREDIT_CUT, DEFAULT_OVERLOAD_REFUSE_AT
from serving.route import load_profile


def test_written_profile_loads_with_the_setting_weights(tmp_path: Path) -> None:
    path = write_profile(Setting(12.0, 0.5, 1.0), tmp_path)
    profile = load_profile(path)
    weights = {s.name: w for s, w in profile.scorers}
    assert weights["prefix-match-scorer"] == 12.0
    assert weights["predicted-ttft-scorer"] == 0.5
    assert profile.plan_picker == "scored" and profile.name == path.stem


def test_grid_covers_every_combination() -> None:
    settings = grid()
    size = len(PREFIX_WEIGHTS) * len(TTFT_WEIGHTS) * len(HEADROOMS)
    assert len(settings) == len(set(settings)) == size
    assert HEADROOMS == (1.0,)  # the gate refuses by its SLO, not a tuned headroom


def test_the_warm_prefix_budget_is_tuned_only_when_asked() -> None:
    plain = grid()
    both = grid(WARM_KV_SHARES)
    assert {s.warm_kv_share for s in plain} == {WARM_KV_SHARE}
    assert {s.warm_kv_share for s in both} == set(WARM_KV_SHARES)
    assert len(both) == len(plain) * len(WARM_KV_SHARES)


def test_the_plan_picker_is_tuned_only_for_several_classes_on_several_kinds(
    tmp_path: Path,
) -> None:
    hetero = ["H100-SXM", "L40S"]
    assert plan_pickers(["interactive", "interactive"], hetero) == (BASE_PLAN_PICKER,)
    assert plan_pickers(["interactive", "batch"], ["H100-SXM"] * 2) == (BASE_PLAN_PICKER,)
    assert plan_pickers(["interactive", "batch"], hetero) == PLAN_PICKER_CHOICES
    assert "planned" in PLAN_PICKER_CHOICES
    both = grid(plan_pickers=PLAN_PICKER_CHOICES)
    assert len(both) == 2 * len(grid()) and {s.plan_picker for s in both} == {*PLAN_PICKER_CHOICES}
    path = write_profile(Setting(1.0, 2.0, 1.0, plan_picker="planned"), tmp_path)
    profile = load_profile(path)
    assert profile.plan_picker == "planned" and path.stem.startswith("planned-")


def test_the_strict_gate_is_tried_with_the_chosen_route_setting_only() -> None:
    chosen = Setting(12.0, 2.0, 1.0, plan_picker="planned")
    # only where the plan may split the classes over the kinds
    assert gate_variants(chosen, split=False) == []
    (strict,) = gate_variants(chosen, split=True)
    assert (strict.prefix_weight, strict.ttft_weight, strict.plan_picker) == (12.0, 2.0, "planned")
    assert strict.overload_refuse_at == STRICT_OVERLOAD_REFUSE_AT < DEFAULT_OVERLOAD_REFUSE_AT
    assert strict.credit_cut == STRICT_CREDIT_CUT == 0.0 < DEFAULT_CREDIT_CUT
    # the grid itself keeps the gate's defaults
    assert {(s.overload_refuse_at, s.credit_cut) for s in grid()} == {
        (DEFAULT_OVERLOAD_REFUSE_AT, DEFAULT_CREDIT_CUT)
    }
    assert gate_variants(strict, split=True) == []


def test_a_policy_builds_its_gate_with_the_tuned_overload_settings() -> None:
    from bench.policies import GateSettings, PlacementSettings, PolicyContext
    from bench.policies.route_path import build

    ctx = PolicyContext(
        seed=0,
        block_tokens=16,
        settings={
            "placement": PlacementSettings(
                slo_gate=GateSettings(overload_refuse_at=0.3, credit_cut=0.0)
            )
        },
    )
    gate = build(ctx).gate
    assert gate is not None
    assert (gate.overload_refuse_at, gate.credit_cut) == (0.3, 0.0)


def test_the_gate_is_tuned_where_the_plan_may_split_the_classes_over_the_kinds() -> None:
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import BATCH, INTERACTIVE, RequestClass
    from placement.paths import repo_root

    hetero = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
    h100x8 = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    assert splits_classes(hetero, [INTERACTIVE, BATCH])  # synthetic
    assert not splits_classes(hetero, [INTERACTIVE])  # mixed, mooncake: one class
    assert not splits_classes(h100x8, [INTERACTIVE, BATCH])  # one kind
    # tiers: a 40 ms TPOT that even an H100's chunk (~47 ms) breaks: no kind is fast
    tight = RequestClass(
        name="interactive", priority=0, ttft_slo_s=0.5, tpot_slo_s=0.04, sheddable=False
    )
    assert not splits_classes(hetero, [tight, BATCH])
