from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.loop.tuning import (
    BASE_PLAN_PICKER,
    BASE_WAITING_PRICE,
    CREDIT_RESERVE,
    CREDIT_SLACK,
    DISPATCHED_WAITING_PRICE,
    HEADROOMS,
    NO_LOSS,
    PLAN_PICKER_CHOICES,
    PREFIX_WEIGHTS,
    SHAPE_FACTOR,
    SHAPE_MIN_REQUESTS,
    SHARE_CAP,
    SHORT_PROMPT_FACTOR,
    STRICT_CREDIT_CUT,
    STRICT_REFUSE_AT,
    TTFT_WEIGHTS,
    TUNE_LOADS,
    WARM_KV_SHARES,
    Setting,
    gate_variants,
    grid,
    keeps_every_load,
    plan_pickers,
    reserve_variant,
    shapes_differ,
    share_cap_variant,
    waiting_variant,
    write_profile,
)
from placement.domain.fleet import load_fleet
from placement.domain.requests import Request
from placement.paths import repo_root
from placement.solver.instance import WARM_KV_SHARE
from serving.admission.slo_gate import DEFAULT_CREDIT_CUT, DEFAULT_OVERLOAD_REFUSE_AT
from serving.route import load_profile
from serving.route.waiting_queue import QUEUED_PROMPT_TOKENS
from sim.workloads.registry import load_workload


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
    (strict,) = gate_variants(chosen)
    assert (strict.prefix_weight, strict.ttft_weight, strict.plan_picker) == (12.0, 2.0, "planned")
    # the strict regime comes on top of the gate's defaults past capacity (engaged by the
    # queue, not by every refusal): the overload threshold and lift themselves are unchanged
    assert (strict.overload_refuse_at, strict.credit_cut) == (
        DEFAULT_OVERLOAD_REFUSE_AT,
        DEFAULT_CREDIT_CUT,
    )
    assert strict.strict_refuse_at == STRICT_REFUSE_AT < DEFAULT_OVERLOAD_REFUSE_AT
    assert strict.strict_credit_cut == STRICT_CREDIT_CUT == 0.0 < DEFAULT_CREDIT_CUT
    # the grid itself keeps the gate's defaults, no strict regime
    assert {(s.overload_refuse_at, s.credit_cut, s.strict_refuse_at) for s in grid()} == {
        (DEFAULT_OVERLOAD_REFUSE_AT, DEFAULT_CREDIT_CUT, None)
    }
    assert gate_variants(strict) == []
    # the TPOT forecast by work is not offered (its tails lost on kv-bound): off everywhere
    assert not any(s.tpot_by_work for s in [*grid(), strict])


def test_a_gate_variant_that_loses_at_one_tuning_load_is_not_kept() -> None:
    base = [20.0, 40.0, 30.0]
    assert keeps_every_load([20.0, 45.0, 40.0], base)  # gains past the knee, none lost
    assert keeps_every_load([19.7, 45.0, 40.0], base)  # 1.5% under at load 1: within NO_LOSS
    # more in sum (100 > 90) but 15% under at the first load: refused
    assert not keeps_every_load([17.0, 45.0, 38.0], base)
    assert not keeps_every_load([20.0, 40.0, 30.0 * (1 - NO_LOSS) - 0.01], base)


def test_a_policy_builds_its_gate_with_the_tuned_overload_settings() -> None:
    from bench.policies import GateSettings, PlacementSettings, PolicyContext
    from bench.policies.route_path import build

    ctx = PolicyContext(
        seed=0,
        block_tokens=16,
        settings={
            "placement": PlacementSettings(
                slo_gate=GateSettings(overload_refuse_at=0.3, credit_cut=0.0, credit_slack=300.0)
            )
        },
    )
    gate = build(ctx).gate
    assert gate is not None
    assert (gate.overload_refuse_at, gate.credit_cut, gate.credit_slack) == (0.3, 0.0, 300.0)
    assert not gate.tpot_by_work
    by_work = PlacementSettings(slo_gate=GateSettings(tpot_by_work=True))
    gate = build(dataclasses.replace(ctx, settings={"placement": by_work})).gate
    assert gate is not None and gate.tpot_by_work and gate.tpot_shed_from is None
    assert not gate.tpot_computed
    computed = PlacementSettings(slo_gate=GateSettings(tpot_computed=True))
    gate = build(dataclasses.replace(ctx, settings={"placement": computed})).gate
    assert gate is not None and gate.tpot_computed and not gate.tpot_by_work
    held = PlacementSettings(slo_gate=GateSettings(tpot_shed_from=0.05))
    gate = build(dataclasses.replace(ctx, settings={"placement": held})).gate
    assert gate is not None and gate.tpot_shed_from == 0.05
    assert not gate.signals.by_model  # one overload signal for the fleet unless told
    per_pool = PlacementSettings(slo_gate=GateSettings(pressure_by_model=True))
    gate = build(dataclasses.replace(ctx, settings={"placement": per_pool})).gate
    assert gate is not None and gate.signals.by_model
    # without a slack no tenant yields for credit alone
    plain = PlacementSettings(slo_gate=GateSettings())
    gate = build(PolicyContext(seed=0, block_tokens=16, settings={"placement": plain})).gate
    assert gate is not None and gate.credit_slack == float("inf")


def test_the_credit_slack_is_tried_on_top_of_both_gates_only_when_asked() -> None:
    chosen = Setting(1.0, 0.5, 1.0)
    assert all(v.credit_slack is None for v in gate_variants(chosen))
    strict, slack, strict_slack = gate_variants(chosen, credit_slack=True)
    assert strict.credit_slack is None and strict.strict_refuse_at == STRICT_REFUSE_AT
    assert slack.credit_slack == CREDIT_SLACK and slack.strict_refuse_at is None
    assert strict_slack.credit_slack == CREDIT_SLACK
    assert strict_slack.strict_refuse_at == STRICT_REFUSE_AT
    # the route setting is the chosen one in every variant
    assert {(v.prefix_weight, v.ttft_weight) for v in (strict, slack, strict_slack)} == {(1.0, 0.5)}


def test_the_waiting_price_is_offered_once_on_top_of_the_chosen_setting(tmp_path: Path) -> None:
    chosen = Setting(12.0, 0.5, 1.0, strict_refuse_at=STRICT_REFUSE_AT)
    short = QUEUED_PROMPT_TOKENS / SHORT_PROMPT_FACTOR - 1.0
    (priced,) = waiting_variant(chosen, short)
    assert priced == dataclasses.replace(chosen, waiting_price=DISPATCHED_WAITING_PRICE)
    assert waiting_variant(priced, short) == []
    # not offered to traffic whose prompts the constant does not overprice by the factor
    assert waiting_variant(chosen, QUEUED_PROMPT_TOKENS / SHORT_PROMPT_FACTOR) == []
    assert waiting_variant(chosen, 10_000.0) == []
    # the grid and the gate variants keep the shipped price
    assert {s.waiting_price for s in [*grid(), *gate_variants(chosen)]} == {BASE_WAITING_PRICE}
    # the written profile carries the price; the shipped price leaves profile and name as before
    shipped, offered = write_profile(chosen, tmp_path), write_profile(priced, tmp_path)
    assert shipped != offered and shipped.stem == "scored-p12-t0.5"
    assert not load_profile(shipped).price_waiting
    profile = load_profile(offered)
    assert profile.price_waiting and not profile.waiting_since_scrape
    weights = {s.name: w for s, w in profile.scorers}
    assert (weights["prefix-match-scorer"], weights["predicted-ttft-scorer"]) == (12.0, 0.5)


# the head's goodput per tuning load of every setting but the variant a test offers
HEAD_GOODPUT = (30.0, 40.0, 30.0)


def _fake_head(
    monkeypatch: pytest.MonkeyPatch,
    knob: Callable[[Any], Any],
    on: Callable[[Any], bool],
    variant: tuple[float, float, float],
) -> list[Any]:
    """Fake the head's goodput per load: a tuning run whose ``knob(ctx)`` is ``on`` scores
    ``variant``, every other :data:`HEAD_GOODPUT`. Returns the knob's value at each run."""
    from bench.loop import run

    seen: list[Any] = []

    def fake_ours(ctx: Any, load: float, **_: Any) -> tuple[Any, Any, None]:
        value = knob(ctx)
        seen.append(value)
        return (on(value), load), ctx.tune, None

    def fake_summarise(result: tuple[bool, float], _: Any) -> SimpleNamespace:
        active, load = result
        got = dict(zip(TUNE_LOADS, variant if active else HEAD_GOODPUT, strict=True))
        return SimpleNamespace(goodput_rps=got[load])

    monkeypatch.setattr(run, "ours", fake_ours)
    monkeypatch.setattr(run, "summarise", fake_summarise)
    return seen


@pytest.mark.parametrize(
    ("workload", "priced", "kept", "offer"),
    [
        ("multi-model", (30.0, 42.0, 40.0), True, True),  # gains in sum, loses nowhere
        ("multi-model", (25.0, 60.0, 60.0), False, True),  # gains in sum, loses 17% at load 1
        ("multi-model", (30.0, 40.0, 30.0), False, True),  # loses nowhere but gains nothing
        ("synthetic", (30.0, 42.0, 40.0), False, True),  # long prompts: not offered
        ("multi-model", (30.0, 42.0, 40.0), False, False),  # not asked for: not offered
    ],
)
def test_the_head_keeps_the_waiting_price_only_if_it_loses_at_no_tuning_load(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workload: str,
    priced: tuple[float, float, float],
    kept: bool,
    offer: bool,
) -> None:
    """The head's goodput faked per load: every setting of the grid and the gate scores
    (30, 40, 30); the priced variant scores ``priced``. ``multi-model``'s prompts are short
    (mean ~230 tokens), ``synthetic``'s long (~3,700)."""
    from bench.loop import run

    offered = _fake_head(
        monkeypatch, lambda ctx: load_profile(ctx.profile).price_waiting, bool, priced
    )
    fleet = "multimodel.yaml" if workload == "multi-model" else "h100x8.yaml"
    case = run.Case(
        workload=load_workload(workload, duration_s=30.0),
        fleet=load_fleet(repo_root() / "data" / "fleets" / fleet),
        peers=("round_robin",),
        loads=(1.0,),
        learn=False,
        offer_waiting_price=offer,
    )
    ctx = run.prepare(case, tmp_path, lambda _: None)
    if not offer:  # not offered unless asked
        assert not any(offered) and ctx.waiting_price == BASE_WAITING_PRICE
        return
    # one variant per case, three tuning runs, and only on short prompts
    assert offered.count(True) == (3 if workload == "multi-model" else 0)
    assert load_profile(ctx.profile).price_waiting is kept
    assert ctx.waiting_price == (DISPATCHED_WAITING_PRICE if kept else BASE_WAITING_PRICE)
    assert f"waiting queue priced {ctx.waiting_price}" in ctx.notes[-1]


def _tenant(name: str, prompt: int, output: int, n: int = SHAPE_MIN_REQUESTS) -> list[Request]:
    return [Request(k, float(k), prompt, output, tenant=name) for k in range(n)]


def _tenants_case(workload: Any, **options: Any) -> Any:
    """A case over h100x8 at load 1 whose whole trace is the head (the tuning tests' faked
    head scores it), with ``options`` on top."""
    from bench.loop import run

    return run.Case(
        workload=workload,
        fleet=load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml"),
        peers=("round_robin",),
        loads=(1.0,),
        learn=False,
        tune_share=1.0,
        **options,
    )


def test_tenants_shapes_differ_by_an_order_of_magnitude_of_prompt_or_output() -> None:
    base = _tenant("a", 1_000, 100)
    longer = int(1_000 * SHAPE_FACTOR)
    assert shapes_differ([*base, *_tenant("long-prompts", longer, 100)])
    assert shapes_differ([*base, *_tenant("long-outputs", 1_000, int(100 * SHAPE_FACTOR))])
    assert not shapes_differ([*base, *_tenant("alike", longer - 1_000, 700)])
    # a tenant of a few requests does not count, nor does one tenant alone
    few = _tenant("few", 100_000, 100, n=SHAPE_MIN_REQUESTS - 1)
    assert not shapes_differ([*base, *few])
    assert not shapes_differ(base)


def test_the_reserve_variant_adds_the_credit_reserve_to_the_chosen_setting() -> None:
    chosen = Setting(4.0, 0.5, 1.0, strict_refuse_at=STRICT_REFUSE_AT)
    assert chosen.credit_reserve == 0.0
    (reserved,) = reserve_variant(chosen)
    assert reserved == dataclasses.replace(chosen, credit_reserve=CREDIT_RESERVE)
    assert reserve_variant(reserved) == []
    # the grid and the gate variants keep no reserve
    assert {s.credit_reserve for s in [*grid(), *gate_variants(chosen, credit_slack=True)]} == {0.0}


@pytest.mark.parametrize(
    ("shaped", "reserved", "kept", "offer"),
    [
        (True, (30.0, 42.0, 40.0), True, True),  # gains in sum, loses nowhere
        (True, (29.5, 39.5, 29.5), True, True),  # a fairness setting: loses under 2% anywhere
        (True, (25.0, 60.0, 60.0), False, True),  # gains in sum, loses 17% at load 1
        (True, (30.0, 40.0, 29.0), False, True),  # loses 3.3% at load 3
        (False, (30.0, 42.0, 40.0), False, True),  # tenants of one shape: not offered
        (True, (30.0, 42.0, 40.0), False, False),  # not asked for: not offered
    ],
)
def test_the_head_keeps_the_credit_reserve_where_shapes_differ_and_it_loses_at_no_load(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shaped: bool,
    reserved: tuple[float, float, float],
    kept: bool,
    offer: bool,
) -> None:
    """The head's goodput faked per load: every setting without the reserve scores (30, 40,
    30), the reserved one ``reserved``; the workload's tenants differ in shape or not."""
    from bench.loop import run

    offered = _fake_head(monkeypatch, lambda ctx: ctx.credit_reserve, bool, reserved)
    workload = load_workload("synthetic", duration_s=30.0)
    other = int(3_000 * SHAPE_FACTOR) if shaped else 3_000
    requests = [*_tenant("a", 3_000, 300, n=40), *_tenant("b", other, 300, n=40)]
    case = _tenants_case(
        dataclasses.replace(workload, requests=requests),
        offer_credit_reserve=offer,
        offer_share_cap=False,
    )
    ctx = run.prepare(case, tmp_path, lambda _: None)
    tried = sum(1 for r in offered if r > 0.0)
    assert tried == (3 if shaped and offer else 0)  # one variant, three tuning loads
    assert ctx.credit_reserve == (CREDIT_RESERVE if kept else 0.0)
    assert f"credit reserve {ctx.credit_reserve}" in ctx.notes[-1]


@pytest.mark.parametrize(
    ("capped", "fixed", "reserve_offered"),
    [
        ((30.0, 42.0, 40.0), None, False),  # the head keeps the offered cap: no reserve offered
        ((30.0, 38.0, 60.0), None, True),  # the cap refused (5% lost at load 2): reserve offered
        ((30.0, 40.0, 30.0), 2.0, False),  # the case fixes a cap: no reserve offered
    ],
)
def test_the_credit_reserve_is_offered_only_where_no_share_cap_holds(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capped: tuple[float, float, float],
    fixed: float | None,
    reserve_offered: bool,
) -> None:
    """Tenants of differing shapes, the reserve asked for: the share cap is tried first
    (scoring ``capped``), and the reserve only on top of a setting without a cap."""
    from bench.loop import run

    seen = _fake_head(
        monkeypatch,
        lambda ctx: (ctx.share_cap, ctx.credit_reserve),
        lambda knobs: knobs[0] == SHARE_CAP,
        capped,
    )
    workload = load_workload("synthetic", duration_s=30.0)
    requests = [*_tenant("a", 3_000, 300, n=40), *_tenant("b", 3_000 * 10, 300, n=40)]
    case = _tenants_case(
        dataclasses.replace(workload, requests=requests),
        gate_share_cap=fixed,
        offer_credit_reserve=True,
    )
    ctx = run.prepare(case, tmp_path, lambda _: None)
    tried = sum(1 for _, reserve in seen if reserve > 0.0)
    assert tried == (3 if reserve_offered else 0)  # one variant, three tuning loads
    # the reserve loses nowhere on the faked head: kept wherever it was offered
    assert ctx.credit_reserve == (CREDIT_RESERVE if reserve_offered else 0.0)
    assert not (ctx.credit_reserve > 0.0 and ctx.share_cap is not None)


def test_the_share_cap_variant_adds_the_cap_to_the_chosen_setting() -> None:
    chosen = Setting(4.0, 0.5, 1.0, strict_refuse_at=STRICT_REFUSE_AT)
    assert chosen.share_cap is None
    (capped,) = share_cap_variant(chosen)
    assert capped == dataclasses.replace(chosen, share_cap=SHARE_CAP)
    assert share_cap_variant(capped) == []


@pytest.mark.parametrize(
    ("tenants", "capped", "fixed", "kept"),
    [
        (2, (30.0, 42.0, 40.0), None, True),  # gains in sum, loses nowhere
        (2, (29.5, 39.5, 29.5), None, False),  # loses under 2% but gains nothing: not kept
        (2, (29.7, 41.0, 40.0), None, True),  # gains in sum, loses 1% at load 1
        (2, (30.0, 40.0, 45.0), None, True),  # a gain past the knee only
        (2, (30.0, 38.0, 60.0), None, False),  # gains in sum, loses 5% at load 2
        (1, (30.0, 42.0, 40.0), None, False),  # one tenant: not offered
        (2, (30.0, 42.0, 40.0), 2.0, False),  # the case fixes a cap: not offered, kept as fixed
    ],
)
def test_the_head_keeps_the_share_cap_where_it_gains_and_loses_at_no_load(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tenants: int,
    capped: tuple[float, float, float],
    fixed: float | None,
    kept: bool,
) -> None:
    """The head's goodput faked per load: every setting without the offered cap scores
    (30, 40, 30), the one with it ``capped``."""
    from bench.loop import run

    offered = _fake_head(monkeypatch, lambda ctx: ctx.share_cap, lambda c: c == SHARE_CAP, capped)
    workload = load_workload("synthetic", duration_s=30.0)
    names = ["a", "b"][:tenants]
    requests = [r for n in names for r in _tenant(n, 3_000, 300, n=40)]
    case = _tenants_case(dataclasses.replace(workload, requests=requests), gate_share_cap=fixed)
    ctx = run.prepare(case, tmp_path, lambda _: None)
    tried = sum(1 for c in offered if c == SHARE_CAP)
    assert tried == (3 if tenants > 1 and fixed is None else 0)  # one variant, three loads
    assert ctx.share_cap == (SHARE_CAP if kept else fixed)
    if fixed is not None:
        assert set(offered) == {fixed}  # every setting tuned with the case's cap
