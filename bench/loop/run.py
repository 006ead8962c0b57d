"""The closed loop against the peers, one workload on one fleet (a *case*).

For a case: the trace is split by time into a tuning head (``tune_share``) and a reported
tail. Everything learned or chosen comes from the head: the predictors (trained on its
telemetry, :mod:`bench.loop.learn`), the first plan (solved on its demand at each load), and the
route profile's scorer weights (picked on the head from a small grid, :mod:`bench.loop.tuning`;
the admission gate refuses by its SLO and learns its forecasts online). The tail is routed at
every load by each peer and by ours — the service's route path with the plan, re-solved every
``period_s`` from the requests it has just routed (:mod:`bench.loop.replan`), behind the SLO
gate — and by the ablations, at the load where the best peer's attainment first falls below
90%. Loads are × the fleet's nominal capacity for the head's request mix (:mod:`sim.capacity`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.loop.alone import alone_figures
from bench.loop.bound import fluid_bound
from bench.loop.class_placement import several_classes_on_several_kinds
from bench.loop.engine_capacity import EngineCapacity
from bench.loop.fairness import (
    MIN_TENANT_REQUESTS,
    entitled_ratios,
    jain_overload,
    request_gpu_seconds,
)
from bench.loop.gate_quality import gate_quality
from bench.loop.gated import Gated
from bench.loop.learn import learn_capacity, roofline_capacity
from bench.loop.plans import NO_GROUPS, Planning
from bench.loop.replan import Replanning
from bench.loop.tuning import (
    BASE_PROFILE,
    BASE_WAITING_PRICE,
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
from bench.loop.warmup import check_warm_up, warm_run, warm_up_requests
from bench.policies import (
    OURS,
    GateSettings,
    PlacementPolicy,
    PlacementSettings,
    PolicyContext,
    make_policy,
)
from models.capacity import Slo
from placement.domain.fleet import Fleet
from placement.domain.requests import Request
from placement.plan import Plan
from placement.solver.capacity import CapacitySource, class_slos
from placement.solver.engine_capacity import EngineCapacity as EngineModelCapacity
from placement.solver.instance import WARM_KV_SHARE
from placement.solver.model import DEFAULT_WEIGHTS, Weights
from placement.solver.pooled_attainment import AttainmentModel, attainment_for
from placement.solver.prefix_groups import DEFAULT_RULE, GroupRule
from placement.solver.solve import SolveOptions
from serving.admission.cost import mean_rates
from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S
from serving.admission.slo_gate import (
    DEFAULT_CREDIT_CUT,
    DEFAULT_OVERLOAD_REFUSE_AT,
    DEFAULT_SLOT_TURN_S,
    GPU_SECONDS,
    TOKENS,
    SloGate,
)
from serving.admission.vtc import TokenWeights
from serving.route import load_profile
from sim.capacity import fleet_capacity, rate_multiplier
from sim.costmodel.factory import cost_model_for_replica
from sim.engine import FCFS, PRIORITY
from sim.faults import Fault
from sim.metrics import request_table, summarise
from sim.router import RoutingPolicy
from sim.simulator import SimConfig, SimResult, Simulator
from sim.workloads.base import Workload

ATTAINMENT_KNEE = 0.9
BOUND_SLICE_S = 30.0
FAILURE_AT = 0.4  # the faults strike at this share of the tail's span …
FAILURE_SETTLE = 0.2  # … and "during" is the next such share of it

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """Our loop with one part changed (the ablations)."""

    name: str
    learned: bool = True
    groups: bool = True
    churn: bool = True
    plan: bool = True
    gate: bool = True
    credits: bool = True
    scored: bool = True  # data/profiles/scored.yaml (False: the default weighted lookup)
    shadow: bool = False  # the gate judges but admits all (its precision and recall)
    audit: float = 0.0  # this share of the gate's refusals admitted anyway (its precision)
    charge: str = GPU_SECONDS  # credits charged in GPU-seconds (TOKENS: per weighted token)
    base_models: bool = True  # the plan moves base models where replicas may hold several
    # base models placed by credit and goodput at SLO (True) or by utilisation (False); None:
    # as the case says (``Case.base_models_by_credit``)
    base_by_credit: bool | None = None


FULL = Variant(name=OURS)
ABLATIONS = (
    Variant(name="ours:roofline_only", learned=False),
    Variant(name="ours:no_prefix_groups", groups=False),
    Variant(name="ours:no_churn_penalty", churn=False),
    Variant(name="ours:fallbacks_only", plan=False),
    Variant(name="ours:no_admission", gate=False),
    Variant(name="ours:weighted_lookup", scored=False),
)
NO_ADMISSION = next(v for v in ABLATIONS if not v.gate)
LOCALITY_ONLY = Variant(name="ours:locality_only", credits=False)
SHADOW_GATE = Variant(name="ours:shadow_gate", shadow=True)
AUDIT_SHARE = 0.1
AUDIT_GATE = Variant(name="ours:audit_gate", audit=AUDIT_SHARE)
TOKEN_CREDITS = Variant(name="ours:token_credits", charge=TOKENS)
# on fleets whose replicas may change base model: the plan with every replica's model fixed
STATIC_MODELS = Variant(name="ours:static_base_models", base_models=False)
# ... and, where the case places them by credit, by the utilisation rule instead
BY_UTILISATION = Variant(name="ours:base_models_by_utilisation", base_by_credit=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    workload: Workload
    fleet: Fleet
    peers: tuple[str, ...]
    loads: tuple[float, ...]
    tune_share: float = 0.6
    period_s: float = 120.0  # re-solve period, seconds of trace time
    overload: float = 2.0  # × our own knee load (capacity at SLO)
    failure_load: float = 1.0
    seed: int = 0
    settings: tuple[Setting, ...] = ()  # what to tune over on the head (empty: the full grid)
    learn: bool = True  # False: the roofline prior stands in for the trained predictors
    # the learned TTFT leaves out each request's wait for a LoRA slot (:func:`~bench.loop.
    # learn.learn_capacity` ``less_slot_wait``), so the capacity at SLO is the replica's and the
    # slot queue stays the route path's and the gate's own term; off by default: the base-model
    # split then reads Llama-8B ~13x faster and gives it 3 of 8 replicas, and multi-model's head
    # loses 40-43% (it gains 0.4-3.7% at a held split; bench/RESULTS.md, "the LoRA slot wait
    # inside the learned TTFT")
    learn_less_slot_wait: bool = False
    # the fleet's engines schedule by the priority ours sends each request with ("class" or
    # "credit", :mod:`serving.admission.engine_priority`; None: FCFS engines). The peers run
    # on the same engines and send none (every request alike: served by arrival)
    engine_priority: str | None = None
    # the head tuning also tries the scraped waiting queue's price (on short prompts only); off
    # by default: on multi-model's tail it gained past the knee but lost at the ratio load and
    # lowered the gate's precision and Jain's index (bench/RESULTS.md)
    offer_waiting_price: bool = False
    # the head tuning also tries the gate's credit reserve (tenants of differing shapes only,
    # where no share cap holds); off by default: the head of mixed over the heterogeneous fleet
    # keeps it, and that tail then loses 3.4-11% at loads 1.5-3 (bench/RESULTS.md)
    offer_credit_reserve: bool = False
    # the head tuning also tries the gate's share cap (:func:`~bench.loop.tuning.
    # share_cap_variant`) on traffic of several tenants, kept where it gains in sum and loses
    # at no tuning load; on by default: the heads of mixed over the heterogeneous fleet and of
    # tiers, whose tails it would cost, refuse it (bench/RESULTS.md)
    offer_share_cap: bool = True
    # where replicas may swap base model, the plan places them by the tenants' credits and
    # goodput at SLO (:func:`~placement.solver.base_models.place_base_models` with credits);
    # off by default: on multi-model's tail (seed 0) it loses no load past 2% and holds its
    # split from either start, but Jain's index at overload falls (0.494 → 0.451) and the
    # capacity it converts credits into replicas with reads Llama ~6× slow (bench/RESULTS.md)
    base_models_by_credit: bool = False
    # the gate keeps its overload signals per model pool (:mod:`serving.admission.
    # overload_signal`; ours and the gated peers alike); off by default: on multi-model's
    # tail it lost 2.4% at load 4 on seed 1 and lowered Jain's index (bench/RESULTS.md)
    gate_pressure_by_model: bool = False
    # the gate's TPOT forecast counts the prompt tokens each replica computes (ours and the
    # gated peers alike; :class:`~serving.admission.slo_gate.SloGate` ``tpot_computed``); off
    # by default: on synthetic over the heterogeneous fleet it made the TPOT refusals right
    # below the knee but lost 2.6–5.2% at the heads' load 2, and mixed's and tiers' tails over
    # that fleet lost 3.7% / 2.5% at one load (bench/RESULTS.md)
    gate_tpot_computed: bool = False
    # past capacity the gate holds a tenant to this many times its credit-weighted max-min
    # entitlement in its model's pool over the last ``gate_share_window_s`` (ours and the
    # gated peers alike; :mod:`serving.admission.share_cap`); None: no cap. Off by default: at
    # 1.5 it took multi-model's tail (seed 0) from Jain 0.506 to 0.745 at overload, but mixed
    # over the heterogeneous fleet lost 2.1% at load 3 and the hold-out seed's Jain fell
    # (bench/RESULTS.md)
    gate_share_cap: float | None = None
    gate_share_window_s: float = DEFAULT_SHARE_WINDOW_S
    # with the share cap, a running LoRA adapter of a tenant at its share yields its slot to a
    # tenant below its share waiting this long for one (ours and the gated peers alike;
    # ``SloGate``'s "Slot turns"); None: never. On by default: on multi-model's tail (seed 0)
    # it took Jain's index at overload from 0.753 to 0.825, no load losing (bench/RESULTS.md)
    gate_slot_turn_s: float | None = DEFAULT_SLOT_TURN_S
    # before each reported run (ours, the peers, the ablations, the shadow and audit gates,
    # the failures alike) the head's requests of its last this many simulated seconds are
    # replayed at the run's rate, and every figure counts the tail's own requests only
    # (:mod:`bench.loop.warmup`); 0: the tail on an empty fleet. The fleet-level figures
    # (utilisation, output tokens/s, retries) stay over the whole run
    warm_up_s: float = 0.0

    def __post_init__(self) -> None:
        check_warm_up(self.warm_up_s, "warm_up_s")


@dataclass(kw_only=True)
class CaseContext:
    """What the head of the trace taught: capacity, nominal scale, the gate's headroom."""

    case: Case
    tune: Workload
    report: Workload
    weights: list[float]
    capacity: CapacitySource
    model_uri: str
    headroom: float = 1.0
    profile: Path = BASE_PROFILE  # the route profile (tuned on the head by :func:`prepare`)
    warm_kv_share: float = WARM_KV_SHARE  # the plan's warm-prefix budget (tuned on the head)
    # the gate past capacity (tuned on the head): its threshold and owed tenants' lift
    overload_refuse_at: float = DEFAULT_OVERLOAD_REFUSE_AT
    credit_cut: float = DEFAULT_CREDIT_CUT
    strict_refuse_at: float | None = None  # the strict regime (None: none)
    strict_credit_cut: float = 0.0
    credit_slack: float | None = None  # past capacity, a tenant this far ahead yields
    credit_reserve: float = 0.0  # past capacity, the TTFT limit's share kept for owed tenants
    tpot_by_work: bool = False  # the gate's TPOT forecast by work (False: as received)
    tpot_shed_from: float | None = None  # the TPOT rule sheds from this pressure (None: always)
    waiting_price: str = BASE_WAITING_PRICE  # the route profile's waiting.price (tuned on the head)
    # the gate's share cap past capacity (the case's, or offered on the head; None: none)
    share_cap: float | None = None
    # the plans' reported predicted-attainment model (None: the route profile's, pooled for
    # the scored picker, :func:`~placement.solver.pooled_attainment.attainment_for`)
    attainment: AttainmentModel | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.share_cap is None:
            self.share_cap = self.case.gate_share_cap

    @property
    def nominal_rps(self) -> float:
        return float(sum(self.weights))

    @property
    def head_span_s(self) -> float:
        """The head's span in trace-seconds (where the tail starts, from the trace's start)."""
        return self.case.tune_share * self.case.workload.duration_s

    def at_load(self, w: Workload, load: float) -> Workload:
        return w.scaled(rate_multiplier(load, w, self.nominal_rps))


def _attainment_of(profile: Path | None) -> AttainmentModel:
    """The attainment model of the route path on ``profile`` (None: the default profile's
    weighted lookup)."""
    return attainment_for(load_profile(profile).plan_picker)


def _simulate(
    ctx: CaseContext,
    policy: RoutingPolicy,
    wl: Workload,
    faults: tuple[Fault, ...] = (),
    *,
    rate: float | None = None,
) -> tuple[SimResult, Workload]:
    """``policy`` routing ``wl``; where ``wl`` is the tail at ``rate`` (a reported run), after
    the case's warm-up (:mod:`bench.loop.warmup`): the result over the tail's requests, and
    the tail as it ran (its arrivals then later by ``Case.warm_up_s``; ``faults`` are timed
    in the run's clock, the warm-up's start at 0)."""
    seconds = ctx.case.warm_up_s if rate is not None else 0.0
    warm = (
        warm_up_requests(ctx.tune, ctx.head_span_s, seconds, rate)
        if rate is not None and seconds > 0
        else []
    )
    return warm_run(lambda joined: _run(ctx, policy, joined, faults), wl, warm, seconds)


def _run(
    ctx: CaseContext, policy: RoutingPolicy, wl: Workload, faults: tuple[Fault, ...]
) -> SimResult:
    top = max(ctx.weights)
    return Simulator(
        ctx.case.fleet,
        policy,
        wl,
        cost_model=cost_model_for_replica,
        # ~200 samples per run for the diagnostic plots (queues, hit rate over time)
        config=SimConfig(
            faults=faults,
            sample_interval_s=max(wl.duration_s / 200, 0.05),
            scheduling=FCFS if ctx.case.engine_priority is None else PRIORITY,
        ),
        weights=[w / top for w in ctx.weights],
    ).run()


def lost_requests(result: SimResult, wl: Workload) -> int:
    """Requests neither served nor refused with a reason: retries exhausted, or unfinished."""
    table = request_table(result.requests, wl.classes)
    lost = sum(1 for r in result.requests if r.error.startswith("lost"))
    return lost + int((~table.completed & ~table.failed).sum())


def _row(result: SimResult, wl: Workload, **extra: Any) -> dict[str, Any]:
    row = summarise(result, wl).as_row()
    row.update(
        lost_requests=lost_requests(result, wl),
        shed=result.refused,
        wall_s=result.wall_s,
        **extra,
    )
    return row


def _credits(wl: Workload) -> dict[str, float]:
    return {name: t.credit_share for name, t in wl.tenants.items()}


def _policy_ctx(ctx: CaseContext, v: Variant, headroom: float) -> PolicyContext:
    wl = ctx.tune
    settings = PlacementSettings(
        slo_gate=(
            GateSettings(
                headroom=headroom,
                credit_cut=ctx.credit_cut if v.credits else 0.0,
                overload_refuse_at=ctx.overload_refuse_at,
                strict_refuse_at=ctx.strict_refuse_at,
                strict_credit_cut=ctx.strict_credit_cut if v.credits else 0.0,
                # the slack is in GPU-seconds: the token-charged ablation has none
                credit_slack=ctx.credit_slack if v.credits and v.charge == GPU_SECONDS else None,
                credit_reserve=ctx.credit_reserve if v.credits else 0.0,
                tpot_by_work=ctx.tpot_by_work,
                tpot_computed=ctx.case.gate_tpot_computed,
                tpot_shed_from=ctx.tpot_shed_from,
                pressure_by_model=ctx.case.gate_pressure_by_model,
                # priced in GPU-seconds, by credit: not in the token-charged or credit-less
                # ablations
                share_cap=ctx.share_cap if v.credits and v.charge == GPU_SECONDS else None,
                share_window_s=ctx.case.gate_share_window_s,
                slot_turn_s=ctx.case.gate_slot_turn_s,
                shadow=v.shadow,
                audit_share=v.audit,
                charge=v.charge,
            )
            if v.gate
            else None
        ),
        classes=wl.classes,
        credits=_credits(wl) if v.credits else {},
        route_profile=ctx.profile if v.scored else None,
        engine_priority=ctx.case.engine_priority,
    )
    return PolicyContext(
        seed=ctx.case.seed, block_tokens=wl.block_tokens, settings={OURS: settings}
    )


def ours(
    ctx: CaseContext,
    load: float,
    v: Variant = FULL,
    *,
    on: Workload | None = None,
    headroom: float | None = None,
    faults: tuple[Fault, ...] = (),
) -> tuple[SimResult, Workload, Planning]:
    """Our loop at ``load`` on the report window (or ``on``): first plan from the head's demand,
    re-solved every period from what was routed."""
    result, target, planning, _ = ours_with_policy(
        ctx, load, v, on=on, headroom=headroom, faults=faults
    )
    return result, target, planning


def ours_with_policy(
    ctx: CaseContext,
    load: float,
    v: Variant = FULL,
    *,
    on: Workload | None = None,
    headroom: float | None = None,
    faults: tuple[Fault, ...] = (),
    keep_plans: bool = False,
) -> tuple[SimResult, Workload, Planning, PlacementPolicy]:
    """:func:`ours`, and the policy that routed (what its gate decided); ``keep_plans``: the
    planning keeps every plan it solved (``Planning.plans``)."""
    source = on if on is not None else ctx.report
    rate = rate_multiplier(load, source, ctx.nominal_rps)
    target = source.scaled(rate)
    head = ctx.at_load(ctx.tune, load)
    by_credit = ctx.case.base_models_by_credit if v.base_by_credit is None else v.base_by_credit
    planning = Planning(
        fleet=ctx.case.fleet,
        tenants=ctx.tune.tenants if v.credits else {},
        classes=ctx.tune.classes,
        capacity=ctx.capacity if v.learned else roofline_capacity(class_slos(ctx.tune.classes)),
        block_tokens=ctx.tune.block_tokens,
        rule=planning_rule(v),
        options=SolveOptions(
            weights=Weights(churn=0.0) if not v.churn else DEFAULT_WEIGHTS,
            attainment=ctx.attainment or _attainment_of(ctx.profile if v.scored else None),
        ),
        warm_kv_share=ctx.warm_kv_share,
        keep_plans=keep_plans,
        move_base_models=v.base_models,
        base_models_by_credit=by_credit,
        base_capacity_guard=_engine_model_capacity(class_slos(ctx.tune.classes))
        if by_credit
        else None,
        base_price=request_price(ctx.case.fleet) if by_credit else None,
    )
    policy = make_policy(OURS, _policy_ctx(ctx, v, headroom or ctx.headroom))
    assert isinstance(policy, PlacementPolicy)
    routing: RoutingPolicy = policy
    if v.plan:
        first: Plan | None = planning.solve(head.requests, window_s=max(head.duration_s, 1.0))
        # the period is in trace time: compressing the trace to a load compresses it too, so
        # every load re-solves after the same number of requests
        routing = Replanning(policy, planning, period_s=ctx.case.period_s / rate, plan=first)
    reported = rate if source is ctx.report else None
    result, target = _simulate(ctx, routing, target, faults, rate=reported)
    return result, target, planning, policy


@functools.cache
def _engine_model_capacity(slos: tuple[Slo, ...]) -> CapacitySource:
    """Capacity at SLO from the kind's iteration-time model
    (:mod:`placement.solver.engine_capacity`), the same whichever base models a swap group held
    when the head's telemetry was taken: the guard on the base-model decision's demand (one per
    SLO set; its tables are built on first use and kept)."""
    return EngineModelCapacity(slos=slos)


def request_price(fleet: Fleet) -> Callable[[Request], float]:
    """What a request costs in the unit credits are charged in: GPU-seconds on the fleet's
    average replica (:func:`~serving.admission.cost.mean_rates`), as the fairness figures
    charge it (:func:`~bench.loop.fairness.request_gpu_seconds`; no cache hit known ahead)."""
    rates = mean_rates((r.accelerator.kind, r.model.name, r.tp) for r in fleet.replicas)
    return lambda r: rates.request(r.input_tokens, 0, r.output_tokens)


def base_model_ablations(case: Case) -> tuple[Variant, ...]:
    """On fleets whose replicas may swap base model: the plan with every replica's model
    fixed, and, where the case places base models by credit, the utilisation rule it replaced
    (what the credits cost in requests)."""
    if not any(spec.models for spec in case.fleet.replicas):
        return ()
    if case.base_models_by_credit:
        return (STATIC_MODELS, BY_UTILISATION)
    return (STATIC_MODELS,)


def ours_fixed_plan(
    ctx: CaseContext,
    load: float,
    plan: Plan,
    planning: Planning,
    v: Variant = FULL,
    *,
    on: Workload | None = None,
) -> tuple[SimResult, Workload]:
    """The full service routing ``on`` (the report part by default) at ``load`` with ``plan``
    installed throughout: no periodic re-solve (``planning`` re-solves only if a replica goes
    down or comes back, as in :func:`ours_with_policy`)."""
    source = on if on is not None else ctx.report
    rate = rate_multiplier(load, source, ctx.nominal_rps)
    policy = make_policy(OURS, _policy_ctx(ctx, v, ctx.headroom))
    assert isinstance(policy, PlacementPolicy)
    routing = Replanning(policy, planning, period_s=None, plan=plan)
    reported = rate if source is ctx.report else None
    return _simulate(ctx, routing, source.scaled(rate), rate=reported)


def shadow_gate(ctx: CaseContext, load: float) -> dict[str, Any]:
    """The gate's precision and recall at ``load`` (:mod:`bench.loop.gate_quality`)."""
    result, target, _, policy = ours_with_policy(ctx, load, SHADOW_GATE)
    return gate_quality(result.requests, target.classes, policy.would_refuse, policy.judgements)


def audit_gate(ctx: CaseContext, load: float) -> dict[str, Any]:
    """The gate's precision at ``load`` in the gated run itself: :data:`AUDIT_SHARE` of its
    refusals admitted anyway (recall is not measured: the refusals not audited are shed), and
    per band of the chance of a miss it judged them at (``by_chance``)."""
    result, target, _, policy = ours_with_policy(ctx, load, AUDIT_GATE)
    quality = gate_quality(result.requests, target.classes, policy.would_refuse, policy.judgements)
    return {
        "precision": quality["precision"],
        "audited": len(policy.would_refuse),
        "by_chance": quality["by_chance"],
    }


def planning_rule(v: Variant) -> GroupRule:
    return DEFAULT_RULE if v.groups else NO_GROUPS


def peer(
    ctx: CaseContext, name: str, load: float, *, gated: bool = False, faults: tuple[Fault, ...] = ()
) -> tuple[SimResult, Workload]:
    rate = rate_multiplier(load, ctx.report, ctx.nominal_rps)
    target = ctx.report.scaled(rate)
    policy: RoutingPolicy = make_policy(
        name, PolicyContext(seed=ctx.case.seed, block_tokens=target.block_tokens)
    )
    if gated:
        gate = SloGate(
            target.classes,
            headroom=ctx.headroom,
            overload_refuse_at=ctx.overload_refuse_at,
            credit_cut=ctx.credit_cut,
            strict_refuse_at=ctx.strict_refuse_at,
            strict_credit_cut=ctx.strict_credit_cut,
            credit_slack=ctx.credit_slack,
            credit_reserve=ctx.credit_reserve,
            tpot_by_work=ctx.tpot_by_work,
            tpot_computed=ctx.case.gate_tpot_computed,
            tpot_shed_from=ctx.tpot_shed_from,
            pressure_by_model=ctx.case.gate_pressure_by_model,
            share_cap=ctx.share_cap,
            share_window_s=ctx.case.gate_share_window_s,
            slot_turn_s=ctx.case.gate_slot_turn_s if ctx.share_cap is not None else None,
        )
        gate.set_credits(_credits(target))
        policy = Gated(policy, gate)
    return _simulate(ctx, policy, target, faults, rate=rate)


def prepare(case: Case, store: Path, say: Say) -> CaseContext:
    """Split, scale, learn, and tune the route profile and the gate — all on the head."""
    tune, report = case.workload.split(case.tune_share)
    weights = fleet_capacity(case.fleet, tune, cost_model_for_replica)
    slos = class_slos(tune.classes)
    if case.learn:
        learned = learn_capacity(
            tune,
            case.fleet,
            store,
            seed=case.seed,
            say=say,
            slos=slos,
            less_slot_wait=case.learn_less_slot_wait,
        )
        capacity: CapacitySource = learned.capacity
        uri = learned.model_uri
    else:
        capacity, uri = roofline_capacity(slos), "roofline-prior"
    ctx = CaseContext(
        case=case, tune=tune, report=report, weights=weights, capacity=capacity, model_uri=uri
    )
    best: tuple[float, Setting] = (-1.0, Setting(1.0, 2.0, 1.0))
    profiles = store / "profiles"
    # the warm-prefix budget matters only to traffic with shared prefixes
    shares = WARM_KV_SHARES if any(r.block_hashes for r in tune.requests) else (WARM_KV_SHARE,)

    def share_cap_of(setting: Setting) -> float | None:
        """The setting's share cap; the case's where the setting names none."""
        return case.gate_share_cap if setting.share_cap is None else setting.share_cap

    def score(setting: Setting) -> list[float]:
        """Goodput on the head at each of :data:`TUNE_LOADS`."""
        ctx.profile = write_profile(setting, profiles)
        ctx.warm_kv_share = setting.warm_kv_share
        ctx.overload_refuse_at = setting.overload_refuse_at
        ctx.credit_cut = setting.credit_cut
        ctx.strict_refuse_at = setting.strict_refuse_at
        ctx.strict_credit_cut = setting.strict_credit_cut
        ctx.credit_slack = setting.credit_slack
        ctx.credit_reserve = setting.credit_reserve
        ctx.tpot_by_work = setting.tpot_by_work
        ctx.tpot_shed_from = setting.tpot_shed_from
        ctx.share_cap = share_cap_of(setting)
        got = []
        for load in TUNE_LOADS:
            say(f"tuning on the head: {setting} at load {load}")
            result, wl, _ = ours(ctx, load, on=tune, headroom=setting.headroom)
            got.append(float(summarise(result, wl).goodput_rps))
        return got

    # with several classes on several accelerator kinds the plan may place the classes apart:
    # whether its choice binds is tuned with the weights
    kinds = {r.accelerator.kind for r in case.fleet.replicas}
    pickers = plan_pickers((r.request_class for r in tune.requests), kinds)
    by_load: list[float] = []
    for setting in case.settings or grid(shares, pickers):
        got = score(setting)
        if sum(got) > best[0]:
            best, by_load = (sum(got), setting), got
    if not case.settings:
        # then the gate past capacity, with the chosen route setting: kept only where it gains
        # in sum and loses at no tuning load
        # the credit slack on traffic with LoRA adapters, where tenants of a few heavy requests
        # on credits split by request rate are served many times their entitlement
        slack = any(r.adapter for r in tune.requests)
        for setting in gate_variants(best[1], credit_slack=slack):
            got = score(setting)
            if sum(got) > best[0] and keeps_every_load(got, by_load):
                best, by_load = (sum(got), setting), got
        # then the gate's share cap, on traffic of several tenants (unless the case fixes
        # one): kept where it gains in sum and loses at no tuning load
        several = len({r.tenant for r in tune.requests}) > 1
        capped = case.offer_share_cap and case.gate_share_cap is None and several
        for setting in share_cap_variant(best[1]) if capped else []:
            got = score(setting)
            if sum(got) > best[0] and keeps_every_load(got, by_load):
                best, by_load = (sum(got), setting), got
        # then, where no share cap holds, the credit reserve, where the tenants' shapes
        # differ: a fairness setting, kept where it loses at no tuning load (it need not gain)
        reserve = (
            case.offer_credit_reserve
            and share_cap_of(best[1]) is None
            and shapes_differ(tune.requests)
        )
        for setting in reserve_variant(best[1]) if reserve else []:
            got = score(setting)
            if keeps_every_load(got, by_load):
                best, by_load = (sum(got), setting), got
        # then the scraped waiting queue's price, on top of all that, under the same rule, on
        # traffic of short prompts
        prompts = (
            float(np.mean([r.input_tokens for r in tune.requests])) if tune.requests else np.inf
        )
        offered = waiting_variant(best[1], prompts) if case.offer_waiting_price else []
        for setting in offered:
            got = score(setting)
            if sum(got) > best[0] and keeps_every_load(got, by_load):
                best, by_load = (sum(got), setting), got
    chosen = best[1]
    ctx.headroom = chosen.headroom
    ctx.warm_kv_share = chosen.warm_kv_share
    ctx.overload_refuse_at = chosen.overload_refuse_at
    ctx.credit_cut = chosen.credit_cut
    ctx.strict_refuse_at = chosen.strict_refuse_at
    ctx.strict_credit_cut = chosen.strict_credit_cut
    ctx.credit_slack = chosen.credit_slack
    ctx.credit_reserve = chosen.credit_reserve
    ctx.tpot_by_work = chosen.tpot_by_work
    ctx.tpot_shed_from = chosen.tpot_shed_from
    ctx.waiting_price = chosen.waiting_price
    ctx.share_cap = share_cap_of(chosen)
    ctx.profile = write_profile(chosen, profiles)
    ctx.notes.append(
        f"tuned on the head (goodput summed at loads {TUNE_LOADS}): gate headroom "
        f"{chosen.headroom}, prefix-match weight {chosen.prefix_weight}, predicted-TTFT weight "
        f"{chosen.ttft_weight} ({ctx.profile.name}), warm-prefix KV share "
        f"{chosen.warm_kv_share}, plan picker {chosen.plan_picker}, gate past capacity: "
        f"refuses at {chosen.overload_refuse_at}, credit cut {chosen.credit_cut}, strict "
        f"(by the queue) at {chosen.strict_refuse_at}, credit cut {chosen.strict_credit_cut}, "
        f"credit slack {chosen.credit_slack}, credit reserve {chosen.credit_reserve}, "
        f"TPOT forecast by work {chosen.tpot_by_work}, TPOT rule sheds from "
        f"{chosen.tpot_shed_from}, scraped waiting queue priced {chosen.waiting_price}, "
        f"share cap {ctx.share_cap}"
    )
    return ctx


def knee(rows: Sequence[dict[str, Any]]) -> float:
    """The highest load (linearly interpolated) at which attainment is still ≥ 90%."""
    pts = sorted((float(r["load"]), float(r["slo_attainment"])) for r in rows)
    last = 0.0
    for (l0, a0), (l1, a1) in itertools.pairwise(pts):
        if a0 >= ATTAINMENT_KNEE > a1:
            return l0 + (a0 - ATTAINMENT_KNEE) / max(a0 - a1, 1e-12) * (l1 - l0)
    if pts and pts[0][1] < ATTAINMENT_KNEE:
        return 0.0
    for load, att in pts:
        if att >= ATTAINMENT_KNEE:
            last = load
    return last


def best_peer(peer_rows: dict[str, list[dict[str, Any]]]) -> str:
    """The peer that holds 90% attainment to the highest load (then: most goodput)."""
    return max(
        peer_rows,
        key=lambda p: (knee(peer_rows[p]), sum(float(r["goodput_rps"]) for r in peer_rows[p])),
    )


#: A load's precision counts toward the minimum only with this many refusals behind it.
MIN_REFUSALS = 20


def gate_summary(
    by_load: dict[str, dict[str, Any]],
    overload: float | None,
    our_rows: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The gate's precision at its worst swept load (over loads with enough refusals), its
    recall at overload, every load's figures with their prompt buckets, and the goodput with
    the gate over the goodput without it at each swept load (``gate_gain``; its minimum)."""
    judged = [q["precision"] for q in by_load.values() if q["refused"] >= MIN_REFUSALS]
    at_overload = by_load[f"overload {overload:.3g}"] if overload is not None else None
    gains = {str(r["load"]): float(r["gate_gain"]) for r in our_rows if "gate_gain" in r}
    return {
        "gate_precision": min(judged) if judged else None,
        "gate_recall_overload": at_overload["recall"] if at_overload is not None else None,
        "gate_gain_min": min(gains.values()) if gains else None,
        "gate_gain_by_load": gains,
        "gate_by_load": by_load,
    }


def audit_load(by_load: dict[str, dict[str, Any]]) -> float | None:
    """The swept load (not the overload) where the shadow precision is worst, over loads with
    at least :data:`MIN_REFUSALS` refusals (None: no such load)."""
    judged = {
        k: float(q["precision"])
        for k, q in by_load.items()
        if not k.startswith("overload") and q["refused"] >= MIN_REFUSALS
    }
    return float(min(judged, key=lambda k: (judged[k], float(k)))) if judged else None


def ratio_load(rows: Sequence[dict[str, Any]]) -> float | None:
    """The first swept load at which attainment is below 90% (None: never in the sweep)."""
    for r in sorted(rows, key=lambda r: float(r["load"])):
        if float(r["slo_attainment"]) < ATTAINMENT_KNEE:
            return float(r["load"])
    return None


def goodput_at(rows: Sequence[dict[str, Any]], load: float) -> float:
    for r in rows:
        if abs(float(r["load"]) - load) < 1e-9:
            return float(r["goodput_rps"])
    raise KeyError(load)


def tenant_service(
    result: SimResult, wl: Workload, *, unit: str = "gpu_s"
) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """(served within SLO, offered, requests) per tenant, the first two in the unit credits
    are charged in (per second): GPU-seconds on the fleet's average replica, cache hits
    discounted (:mod:`serving.admission.cost`), so a tenant of long prompts or long outputs is
    not called starved for being served fewer, heavier requests; ``unit="tokens"``: the
    Virtual Token Counter's weighted tokens (prefill 1, decode 2), the unit before."""
    t = request_table(result.requests, wl.classes)
    if unit == "tokens":
        weights = TokenWeights()
        work = weights.prefill * t.input_tokens + weights.decode * t.output_tokens
    else:
        work = request_gpu_seconds(result.fleet, t)
    window = max(float(t.arrival.max() - t.arrival.min()), 1e-9) if len(t.arrival) else 1.0
    tenants = np.unique(t.tenant)
    good = {str(k): float(work[(t.tenant == k) & t.met].sum()) / window for k in tenants}
    offered = {str(k): float(work[t.tenant == k].sum()) / window for k in tenants}
    requests = {str(k): int((t.tenant == k).sum()) for k in tenants}
    return good, offered, requests


def run_case(case: Case, store: Path, say: Say) -> dict[str, Any]:
    """Every figure of one case: rows, solves, bound, ratio, fairness, ablations, failures."""
    name = f"{case.workload.name} on {case.fleet.name}"
    ctx = prepare(case, store, say)
    rows: list[dict[str, Any]] = []
    solves: list[dict[str, Any]] = []
    tag = {"workload": case.workload.name, "fleet": case.fleet.name}
    engine = EngineCapacity(case.fleet)
    kept: dict[tuple[str, float], SimResult] = {}
    gate_by_load: dict[str, dict[str, Any]] = {}
    for load in case.loads:
        for p in case.peers:
            say(f"{name}: {p} @ load {load}")
            result, wl = peer(ctx, p, load)
            rows.append(_row(result, wl, policy=p, load=load, **tag))
            kept[(p, load)] = result
        say(f"{name}: ours @ load {load}")
        result, wl, planning = ours(ctx, load)
        span = max(wl.duration_s, 1.0)
        bound = fluid_bound(
            wl.requests,
            case.fleet,
            wl.classes,
            engine,
            block_tokens=wl.block_tokens,
            window_s=span,
            slice_s=min(BOUND_SLICE_S, span / 4),
            adapters=wl.adapters,
        )
        kept[(OURS, load)] = result
        row = _row(result, wl, policy=OURS, load=load, **tag)
        row.update(
            fluid_bound_rps=bound.goodput_rps,
            share_of_bound=row["goodput_rps"] / max(bound.goodput_rps, 1e-9),
            resolves=len(planning.records),
        )
        say(f"{name}: ours with the gate in shadow @ load {load}")
        quality = shadow_gate(ctx, load)
        # the service must be at least as good with its gate as without it, at every load
        say(f"{name}: ours without its gate @ load {load}")
        bare, bare_wl, _ = ours(ctx, load, NO_ADMISSION)
        without = float(summarise(bare, bare_wl).goodput_rps)
        row.update(
            gate_precision=quality["precision"],
            gate_recall=quality["recall"],
            gate_refused_share=quality["refused_share"],
            goodput_without_gate_rps=without,
            gate_gain=float(row["goodput_rps"]) / max(without, 1e-9),
        )
        gate_by_load[str(load)] = quality
        rows.append(row)
        solves += [dict(dataclasses.asdict(s), load=load, **tag) for s in planning.records]
    peer_rows = {p: [r for r in rows if r["policy"] == p] for p in case.peers}
    our_rows = [r for r in rows if r["policy"] == OURS]
    best = best_peer(peer_rows)
    at = ratio_load(peer_rows[best])
    summary: dict[str, Any] = {
        **tag,
        "requests_reported": len(ctx.report),
        "requests_tuned": len(ctx.tune),
        "nominal_capacity_rps": ctx.nominal_rps,
        "capacity_source": ctx.model_uri,
        "gate_headroom": ctx.headroom,
        "route_profile": ctx.profile.name,
        "warm_kv_share": ctx.warm_kv_share,
        "gate_overload_refuse_at": ctx.overload_refuse_at,
        "gate_credit_cut": ctx.credit_cut,
        "gate_strict_refuse_at": ctx.strict_refuse_at,
        "gate_strict_credit_cut": ctx.strict_credit_cut,
        "gate_credit_slack": ctx.credit_slack,
        "gate_credit_reserve": ctx.credit_reserve,
        "gate_tpot_by_work": ctx.tpot_by_work,
        "gate_tpot_shed_from": ctx.tpot_shed_from,
        "gate_pressure_by_model": ctx.case.gate_pressure_by_model,
        "gate_tpot_computed": ctx.case.gate_tpot_computed,
        "gate_share_cap": ctx.share_cap,
        "gate_slot_turn_s": ctx.case.gate_slot_turn_s if ctx.share_cap is not None else None,
        "warm_up_s": case.warm_up_s,
        "waiting_price": ctx.waiting_price,
        "best_peer": best,
        "best_peer_knee_load": knee(peer_rows[best]),
        "our_knee_load": knee(our_rows),
        "ratio_load": at,
        "notes": ctx.notes,
    }
    ablation_load = at if at is not None else max(case.loads)
    summary["diagnostics"] = [(OURS, ablation_load), (best, ablation_load)]
    diagnostics = [(f"{p} @ load {x}", kept[(p, x)]) for p, x in summary["diagnostics"]]
    kept.clear()  # the rest of the sweep's runs are summarised in rows already
    if at is not None:
        ours_g, peer_g = goodput_at(our_rows, at), goodput_at(peer_rows[best], at)
        summary["ratio_vs_best_peer"] = ours_g / max(peer_g, 1e-9)
        at_row = next(r for r in our_rows if float(r["load"]) == at)
        summary["share_of_bound"] = float(at_row["share_of_bound"])
        # the most any policy could reach against this peer here: the fluid bound's ratio
        summary["ratio_ceiling"] = float(at_row["fluid_bound_rps"]) / max(peer_g, 1e-9)
    else:
        summary["ratio_vs_best_peer"] = None
        summary["share_of_bound"] = None
        summary["ratio_ceiling"] = None
        ctx.notes.append(f"{best} holds 90% attainment at every swept load")
    summary["share_of_bound_by_load"] = {str(r["load"]): r["share_of_bound"] for r in our_rows}
    # admission's share of the lead: the best peer behind the very same gate
    say(f"{name}: {best}+gate @ load {ablation_load}")
    result, wl = peer(ctx, best, ablation_load, gated=True)
    gated_row = _row(result, wl, policy=f"{best}+gate", load=ablation_load, **tag)
    rows.append(gated_row)
    summary["ratio_vs_best_peer_with_our_gate"] = goodput_at(our_rows, ablation_load) / max(
        float(gated_row["goodput_rps"]), 1e-9
    )
    full_goodput = goodput_at(our_rows, ablation_load)
    ablations: dict[str, float] = {}
    for v in (*ABLATIONS, *base_model_ablations(case)):
        say(f"{name}: {v.name} @ load {ablation_load}")
        result, wl, planning = ours(ctx, ablation_load, v)
        ablated = _row(result, wl, policy=v.name, load=ablation_load, **tag)
        rows.append(ablated)
        ablations[v.name] = full_goodput / max(float(ablated["goodput_rps"]), 1e-9)
    # the full service over its own fallbacks: what the global plan adds
    ablations["plan_gain"] = ablations["ours:fallbacks_only"]
    summary["ablations"] = ablations
    # "2× overload": twice the load we serve at SLO (our knee), not twice the nominal capacity,
    # which a cache-aware fleet may exceed without overload
    our_knee = knee(our_rows)
    if our_knee == 0.0:
        # below 90% attainment at every swept load: "twice our knee" does not exist, and twice
        # the grid's top would be far outside what was measured
        ctx.notes.append(
            "our attainment is below 90% at every swept load (knee at load 0): no overload "
            "figures; sweep lower loads"
        )
        summary.update(jain_overload=None, overload_load=None)
        summary.update(gate_summary(gate_by_load, None, our_rows))
    else:
        overload = case.overload * (our_knee or max(case.loads))
        summary.update(fairness(ctx, rows, tag, say, overload))
        say(f"{name}: ours with the gate in shadow @ overload {overload:.3g}")
        gate_by_load[f"overload {overload:.3g}"] = shadow_gate(ctx, overload)
        summary.update(gate_summary(gate_by_load, overload, our_rows))
    # the shadow's precision is the gate's in a fleet that admitted everything it refused; the
    # audit measures it in the gated run itself, at the load where the shadow's is worst
    worst = audit_load(gate_by_load)
    if worst is not None:
        say(f"{name}: ours with a share of its refusals audited @ load {worst}")
        audit = audit_gate(ctx, worst)
        summary["gate_precision_audited"] = audit["precision"]
        summary["gate_audit"] = {"load": worst, **audit}
    else:
        summary["gate_precision_audited"] = None
        summary["gate_audit"] = None
    if several_classes_on_several_kinds(diagnostics):
        # what each tenant's kinds give its traffic alone (the bound cannot see its bursts)
        say(f"{name}: each tenant alone on its kinds @ load {ablation_load}")
        ours_result = diagnostics[0][1]
        summary["tenants_alone"] = alone_figures(
            ours_result,
            ctx.at_load(ctx.report, ablation_load),
            case.fleet,
            make_policy,
            seed=case.seed,
        )
    failure, failure_runs = failures(ctx, best, say)
    summary["lost_requests"] = failure["ours"]["lost_requests"]
    summary["failures"] = failure
    return {
        "summary": summary,
        "runs": rows,
        "solves": solves,
        "diagnostics": diagnostics,
        "failure_runs": failure_runs,
    }


def fairness(
    ctx: CaseContext, rows: list[dict[str, Any]], tag: dict[str, str], say: Say, load: float
) -> dict[str, Any]:
    """Jain's index of entitlement-normalised goodput at ``load`` (the overload; over tenants
    with at least :data:`MIN_TENANT_REQUESTS` requests, and over all) and what fairness costs
    against our locality-only variant (no credits in the plan or the gate)."""
    out: dict[str, Any] = {"overload": load}
    credits = _credits(ctx.report)
    for v in (FULL, LOCALITY_ONLY, TOKEN_CREDITS):
        say(f"fairness: {v.name} @ load {load}")
        result, wl, _ = ours(ctx, load, v)
        good, offered, requests = tenant_service(result, wl)
        row = _row(result, wl, policy=v.name + "@overload", load=load, **tag)
        row["jain_entitled"] = jain_overload(good, offered, credits, requests)
        rows.append(row)
        good_tokens, offered_tokens, _ = tenant_service(result, wl, unit="tokens")
        out[v.name] = {
            "goodput_rps": row["goodput_rps"],
            "jain": row["jain_entitled"],
            "jain_in_tokens": jain_overload(good_tokens, offered_tokens, credits, requests),
            "jain_all_tenants": jain_overload(good, offered, credits),
            "ratio_to_entitlement": entitled_ratios(good, offered, credits),
            "requests": requests,
        }
    fair, local = out[FULL.name], out[LOCALITY_ONLY.name]
    out["jain_overload"] = fair["jain"]
    # the same gate charging per weighted token instead (how credits were charged before)
    out["jain_token_charge"] = out[TOKEN_CREDITS.name]["jain"]
    out["min_tenant_requests"] = MIN_TENANT_REQUESTS
    out["fairness_cost"] = max(0.0, 1.0 - fair["goodput_rps"] / max(local["goodput_rps"], 1e-9))
    return {
        "jain_overload": out["jain_overload"],
        "jain_token_charge": out["jain_token_charge"],
        "fairness_cost": out["fairness_cost"],
        "fairness": out,
    }


def failures(
    ctx: CaseContext, best: str, say: Say
) -> tuple[dict[str, Any], list[tuple[str, SimResult]]]:
    """Kill one replica and slow another 3× at 40% of the tail's span, at ``failure_load``:
    requests lost, how long routes still reached the dead replica, attainment before, during
    (the next 20% of the span) and after."""
    load = ctx.case.failure_load
    span = ctx.at_load(ctx.report, load).duration_s
    # the tail's clock (``at_s``) and the run's, which a warm-up starts earlier
    at_s = FAILURE_AT * span
    at = ctx.case.warm_up_s + at_s
    ids = [r.id for r in ctx.case.fleet.replicas]
    faults = (
        Fault(at_s=at, replica=ids[0], kind="kill"),
        Fault(at_s=at, replica=ids[1], kind="slow", factor=3.0),
    )
    out: dict[str, Any] = {"load": load, "at_s": at_s, "killed": ids[0], "slowed": ids[1]}
    runs: list[tuple[str, SimResult]] = []
    for who in (OURS, best):
        say(f"failures: {who} @ load {load}")
        if who == OURS:
            result, wl, _ = ours(ctx, load, faults=faults)
        else:
            result, wl = peer(ctx, who, load, faults=faults)
        runs.append((f"{who} @ load {load}, {ids[0]} killed, {ids[1]} slowed 3×", result))
        t = request_table(result.requests, wl.classes)
        settle = at + FAILURE_SETTLE * span
        during = (t.arrival >= at) & (t.arrival < settle)
        dead_routes = [s for s in result.routes_to_dead if s >= at]
        out["ours" if who == OURS else "best_peer"] = {
            "policy": who,
            "lost_requests": lost_requests(result, wl),
            "routes_to_dead": len(dead_routes),
            "last_route_to_dead_s": (max(dead_routes) - at) if dead_routes else 0.0,
            "attainment_before": float(t.met[t.arrival < at].mean()),
            "attainment_during": float(t.met[during].mean()) if during.any() else None,
            "attainment_after": float(t.met[t.arrival >= settle].mean())
            if (t.arrival >= settle).any()
            else None,
        }
    return out, runs
