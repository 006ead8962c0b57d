from __future__ import annotations

import dataclasses
import math

import pytest
from route_builders import NOW, chain, group, make_path, plan, query, route, states

from placement.domain.requests import DEFAULT_CLASSES
from placement.errors import InputError
from serving.admission.cost import gpu_rates
from serving.admission.forecast import Forecast
from serving.admission.slo_gate import (
    ADMITTED,
    CREDIT,
    DEFAULT_OVERLOAD_REFUSE_AT,
    DEFAULT_REFUSE_AT,
    PRESSURE_FLOOR,
    SLOT_HANDOVER_S,
    SLOT_QUEUE_MIN_WEIGHT_S2,
    STRICT_FROM,
    TPOT,
    TPOT_SHED_SPAN,
    TTFT,
    UNREACHABLE,
    SloGate,
    calibration_key,
    cold_move_crowds,
)
from serving.admission.tpot_calibration import ChunkShares
from serving.admission.vtc import VirtualTokenCounter
from serving.route import PlacementRoutePath
from serving.route.decode_steps import decode_step_table
from serving.route.ttft import prefill_table
from serving.route.types import Decision, ReplicaState, RouteQuery

H100 = decode_step_table("H100-SXM", "llama-3-8b", 1)
L40S = decode_step_table("L40S", "llama-3-8b", 1)


def _decoding(
    table_step: float, table_full: float, *, gaps: int, queued: float, rate: float = 4_000.0
) -> Forecast:
    """A request with a quick first token on a replica whose decode-only and full-chunk
    steps are given, ``queued`` prompt tokens ahead and ``rate`` prompt tokens/s arriving in
    requests of 1,000 tokens."""
    return Forecast(
        ttft_s=0.2,
        ttft_spread=0.05,
        step_s=table_step,
        full_step_s=table_full,
        gaps=gaps,
        budget_tokens=2000.0,
        prompt_rate=rate,
        request_rate=rate / 1000.0,
        queued_tokens=queued,
    )


L40S_STEP = L40S.decode_step(33.0, 50_000.0)
L40S_FULL = L40S_STEP + L40S.prefill_s_per_token * 0.72 * L40S.prompt_budget(33.0)
H100_STEP = H100.decode_step(33.0, 50_000.0)
H100_FULL = H100_STEP + H100.prefill_s_per_token * 0.62 * H100.prompt_budget(33.0)


@pytest.mark.parametrize(
    ("case", "seen", "rule"),
    [
        ("first token well inside the SLO", Forecast(ttft_s=1.5, ttft_spread=0.05), ADMITTED),
        ("first token well past the SLO", Forecast(ttft_s=2.5, ttft_spread=0.05), TTFT),
        # at the SLO itself a forecast is a coin toss: not a refusal that would be right
        ("first token at the SLO", Forecast(ttft_s=2.0, ttft_spread=0.05), ADMITTED),
        ("an uncertain forecast past the SLO", Forecast(ttft_s=2.1, ttft_spread=0.5), ADMITTED),
        (
            "short decode behind a prompt backlog on a slow replica",
            _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=40_000.0),
            TPOT,
        ),
        (
            "short decode on a quiet slow replica",
            _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=0.0, rate=500.0),
            ADMITTED,
        ),
        (
            "long decode behind a modest backlog on a slow replica (it averages out)",
            _decoding(L40S_STEP, L40S_FULL, gaps=400, queued=8_000.0, rate=1_000.0),
            ADMITTED,
        ),
        (
            "short decode behind a prompt backlog on an H100 (full chunks are fast enough)",
            _decoding(H100_STEP, H100_FULL, gaps=4, queued=200_000.0),
            ADMITTED,
        ),
    ],
)
def test_refuses_what_would_miss_and_admits_what_would_meet(
    case: str, seen: Forecast, rule: str
) -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert gate.judge("a", "interactive", seen) == (rule == ADMITTED), case
    assert gate.last.rule == rule, case


def test_a_long_prompt_is_judged_by_its_uncached_tokens_not_its_length() -> None:
    table = prefill_table("L40S", "llama-3-8b", 1)
    gate = SloGate(DEFAULT_CLASSES)
    queued = 4_000.0
    cached = Forecast(ttft_s=table.ttft(32_768 - 30_720, queued) * 0.72, ttft_spread=0.05)
    uncached = Forecast(ttft_s=table.ttft(32_768, queued) * 0.72, ttft_spread=0.05)
    assert gate.judge("a", "interactive", cached)  # its prefix is on that replica
    assert not gate.judge("a", "interactive", uncached)  # the whole prompt to prefill
    assert gate.last.rule == TTFT


def test_exact_latencies_refuse_past_the_class_slo() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert gate.admit("a", "interactive", 1.9)
    assert not gate.admit("a", "interactive", 2.1)
    assert gate.refused[("a", "interactive")] == 1
    assert not gate.admit("a", "interactive", 0.5, 0.2)  # TPOT 200 ms against 100 ms
    # batch: judged by its own 30 s SLO (earlier would refuse requests that meet) unless
    # told to shed at a share of it
    assert gate.admit("a", "batch", 29.0) and not gate.admit("a", "batch", 31.0)
    shedding = SloGate(DEFAULT_CLASSES, shed_factor=0.5)
    assert shedding.admit("a", "batch", 14.0) and not shedding.admit("a", "batch", 16.0)


def test_retry_after_is_the_forecast_wait_rounded_up() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert not gate.judge("a", "interactive", Forecast(ttft_s=4.2, ttft_spread=0.05))
    assert gate.retry_after_s == 5
    assert not gate.admit("a", "interactive", 0.3, 0.5)  # a TPOT refusal: at least 1 s
    assert gate.retry_after_s == 1


def _overload(gate: SloGate) -> None:
    for _ in range(300):
        gate.admit("x", "interactive", 5.0)  # the fleet refuses interactive work


def test_past_capacity_the_gate_refuses_what_is_more_likely_to_miss_than_meet() -> None:
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0)
    doubtful = Forecast(ttft_s=2.05, ttft_spread=0.05)  # ~70% likely to miss
    assert gate.refuse_threshold() == pytest.approx(gate.refuse_at)
    assert gate.judge("a", "interactive", doubtful)
    _overload(gate)
    assert gate.pressure > 0.9
    assert gate.refuse_threshold() == pytest.approx(DEFAULT_OVERLOAD_REFUSE_AT)
    assert not gate.judge("a", "interactive", doubtful)
    assert gate.judge("a", "interactive", Forecast(ttft_s=1.9, ttft_spread=0.05))


def test_pressure_follows_refusals_over_the_ttft_slo_not_a_burst() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    late = Forecast(ttft_s=5.0, ttft_spread=0.05)
    for k in range(50):  # 50 refusals within 50 ms: a burst the queue absorbs
        gate.judge("a", "interactive", late, now=10.0 + k * 0.001)
    assert gate.pressure < 0.05
    for k in range(400):  # refusals for 4 s, twice the TTFT SLO: an overload
        gate.judge("a", "interactive", late, now=11.0 + k * 0.01)
    assert gate.pressure > 0.5


def test_under_overload_doubtful_requests_of_tenants_over_credit_yield_first() -> None:
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.5)
    gate.set_credits({"owed": 0.5, "greedy": 0.5})
    gate.started("owed", 100)
    gate.started("greedy", 100_000)  # far over its share now
    assert gate.refuse_threshold("greedy") == gate.refuse_threshold("owed")  # no pressure
    _overload(gate)
    assert gate.refuse_threshold("greedy") < gate.refuse_threshold("owed")
    doubtful = Forecast(ttft_s=2.03, ttft_spread=0.05)  # ~62% likely to miss
    assert gate.judge("owed", "interactive", doubtful)
    assert not gate.judge("greedy", "interactive", doubtful)
    assert gate.last.rule == CREDIT
    # what is sure to meet is admitted for every tenant
    assert gate.judge("greedy", "interactive", Forecast(ttft_s=1.0, ttft_spread=0.05))


def _tpot_refusals(gate: SloGate, n: int = 300) -> None:
    """Interactive requests whose first token is quick but whose short decodes are sure to
    miss their TPOT: refused for the TPOT, never for the queue."""
    for _ in range(n):
        gate.judge("x", "interactive", _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=40_000.0))
        assert gate.last.rule == TPOT


def test_the_strict_threshold_engages_only_when_refusals_led_by_the_first_token_say_so() -> None:
    """Past capacity by TPOT refusals alone (decodes that miss beside prompt chunks, as
    ``tiers``' code completions on H100s at load 1) the strict gate keeps the overload
    threshold: its own refusals at 0.3 would otherwise keep it strict. A queue that overflows
    (TTFT refusals) engages it, owed tenants' lift going with it."""
    doubtful = Forecast(ttft_s=1.975, ttft_spread=0.05)  # ~40% likely to miss its first token
    gate = SloGate(DEFAULT_CLASSES, strict_refuse_at=0.3, strict_credit_cut=0.0)
    gate.set_credits({"owed": 0.5, "greedy": 0.5})
    gate.started("owed", 100)
    gate.started("greedy", 100_000)
    _tpot_refusals(gate)
    assert gate.pressure > 0.9 and gate.ttft_pressure == 0.0 and gate.strictness() == 0.0
    assert gate.refuse_threshold() == pytest.approx(DEFAULT_OVERLOAD_REFUSE_AT)
    assert gate.refuse_threshold("owed") > gate.refuse_threshold("greedy")  # the lift holds
    assert gate.judge("greedy", "interactive", doubtful)
    # the queue overflows: first tokens would be late
    _overload(gate)
    assert gate.ttft_pressure > PRESSURE_FLOOR and gate.strictness() == 1.0
    assert gate.refuse_threshold() == pytest.approx(0.3)
    assert gate.refuse_threshold("owed") == pytest.approx(gate.refuse_threshold("greedy"))
    assert not gate.judge("owed", "interactive", doubtful)
    assert gate.last.rule == TTFT


def _judged_at(gate: SloGate, pressure: float, seen: Forecast) -> str:
    gate.pressure = pressure
    gate.judge("a", "interactive", seen)
    return gate.last.rule


def test_below_tpot_shed_from_the_tpot_rule_refuses_only_what_is_sure_to_miss() -> None:
    """Past the pressure floor the gate refuses what is likelier to miss than its lowered
    threshold, and a TPOT refusal there sheds load as much as it forecasts a miss. With
    ``tpot_shed_from`` the TPOT chance refuses only at ``refuse_at`` until the share of SLO
    refusals reaches it, and sheds again (as the TTFT chance) at :data:`TPOT_SHED_SPAN` times
    it; a TTFT chance is judged as before throughout."""
    doubtful_tpot = _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=7_000.0)  # ~75% to miss
    sure_tpot = _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=20_000.0)  # ~99%
    doubtful_ttft = Forecast(ttft_s=2.05, ttft_spread=0.05)  # ~70% to miss
    assert 0.7 < doubtful_tpot.tpot_miss(0.1) < DEFAULT_REFUSE_AT < sure_tpot.tpot_miss(0.1)
    plain = SloGate(DEFAULT_CLASSES, credit_cut=0.0)
    held = SloGate(DEFAULT_CLASSES, credit_cut=0.0, tpot_shed_from=0.1)
    past_floor = 0.08  # the threshold is down to ~0.66, under the TPOT rule's start
    assert _judged_at(plain, past_floor, doubtful_tpot) == TPOT
    assert _judged_at(held, past_floor, doubtful_tpot) == ADMITTED
    assert _judged_at(held, past_floor, sure_tpot) == TPOT
    assert _judged_at(held, past_floor, doubtful_ttft) == TTFT
    assert _judged_at(held, 0.1 * TPOT_SHED_SPAN, doubtful_tpot) == TPOT  # it sheds again
    for pressure, shedding in ((0.0, 0.0), (0.1, 0.0), (0.2, 0.5), (0.3, 1.0), (0.9, 1.0)):
        held.pressure = pressure
        assert held.tpot_shedding() == pytest.approx(shedding)
    assert plain.tpot_shedding() == 1.0


def test_until_the_tpot_rule_sheds_a_long_decode_is_judged_by_the_model_alone() -> None:
    """Past the pressure floor the replica's observed decodes blend into the TPOT chance; for
    a long decode that share lags what it describes, so with ``tpot_shed_from`` it counts only
    as far as the TPOT rule sheds. A short decode's blend is kept."""
    missed = ChunkShares(tuple([0.0] * 19 + [20.0]))  # the replica's recent decodes all missed
    long = dataclasses.replace(
        _decoding(L40S_STEP, L40S_FULL, gaps=400, queued=8_000.0, rate=1_000.0), observed=missed
    )
    assert long.tpot_miss(0.1) < 0.01 and long.tpot_miss(0.1, observed=True) > 0.9
    plain = SloGate(DEFAULT_CLASSES, credit_cut=0.0)
    held = SloGate(DEFAULT_CLASSES, credit_cut=0.0, tpot_shed_from=0.1)
    assert _judged_at(plain, 0.08, long) == TPOT
    assert _judged_at(held, 0.08, long) == ADMITTED
    assert _judged_at(held, 0.3, long) == TPOT
    short = dataclasses.replace(
        _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=0.0, rate=500.0), observed=missed
    )
    held.pressure = 0.08
    assert held._tpot_chance(short, 0.1) == pytest.approx(short.tpot_miss(0.1, observed=True))


def test_the_strict_regime_grows_from_half_the_floor_and_is_off_without_a_setting() -> None:
    gate = SloGate(DEFAULT_CLASSES, strict_refuse_at=0.3)
    for share, strictness in ((0.0, 0.0), (STRICT_FROM, 0.0), (PRESSURE_FLOOR, 1.0), (0.5, 1.0)):
        gate.ttft_pressure = share
        assert gate.strictness() == pytest.approx(strictness)
    gate.ttft_pressure = (STRICT_FROM + PRESSURE_FLOOR) / 2
    gate.pressure = 1.0
    assert gate.refuse_threshold() == pytest.approx((DEFAULT_OVERLOAD_REFUSE_AT + 0.3) / 2)
    plain = SloGate(DEFAULT_CLASSES)
    _overload(plain)
    assert plain.strictness() == 0.0
    assert plain.refuse_threshold() == pytest.approx(DEFAULT_OVERLOAD_REFUSE_AT)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"headroom": 0}, "headroom"),
        ({"credit_cut": 1.0}, "credit_cut"),
        ({"shed_factor": 0}, "shed_factor"),
        ({"tpot_headroom": 0}, "tpot_headroom"),
        ({"refuse_at": 0.0}, "refuse_at"),
        ({"refuse_at": 0.6, "overload_refuse_at": 0.8}, "overload_refuse_at"),
        ({"strict_refuse_at": 0.6}, "strict_refuse_at"),
        ({"strict_refuse_at": 0.0}, "strict_refuse_at"),
        ({"strict_credit_cut": 1.0}, "strict_credit_cut"),
        ({"tpot_shed_from": 0.0}, "tpot_shed_from"),
        ({"tpot_shed_from": 1.0}, "tpot_shed_from"),
        ({"credit_reserve": 1.0}, "credit_reserve"),
        ({"credit_reserve": -0.1}, "credit_reserve"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InputError) as info:
        SloGate(DEFAULT_CLASSES, **kwargs)
    assert info.value.field == field


def test_unknown_class_names_the_field() -> None:
    with pytest.raises(InputError) as info:
        SloGate(DEFAULT_CLASSES).admit("a", "bulk", 0.1)
    assert info.value.field == "request_class"


def test_sheddable_work_is_judged_by_its_own_slo_under_pressure_too() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    _overload(gate)
    assert gate.pressure > 0.9
    assert gate.admit("bulk", "batch", 20.0)  # a batch request that meets its 30 s SLO
    assert not gate.admit("bulk", "batch", 40.0)
    # batch refusals do not measure overload: interactive requests set the pressure
    before = gate.pressure
    for _ in range(50):
        gate.admit("bulk", "batch", 40.0)
    assert gate.pressure == before


def test_a_queued_request_is_judged_by_the_time_it_has_left() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    seen = Forecast(ttft_s=1.5, ttft_spread=0.0)
    assert gate.judge("a", "interactive", seen)  # 1.5 s against the class's 2 s
    assert not gate.judge("a", "interactive", seen, budget_s=1.0)  # waited: 1 s left
    assert gate.last.ttft_limit_s == pytest.approx(1.0)
    assert gate.judge("a", "interactive", seen, budget_s=3.0)  # a looser deadline
    assert gate.limit_s("interactive", budget_s=-0.5) == 0.0


def _replica(accelerator: str) -> ReplicaState:
    return ReplicaState(
        id=accelerator,
        address=accelerator,
        model="llama-3-8b",
        accelerator=accelerator,
        tp=1,
        kv_capacity_tokens=200_000,
    )


def _request(tenant: str, prompt: int, output: int) -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model="llama-3-8b",
        request_class="interactive",
        block_hashes=(),
        input_tokens=prompt,
        max_output_tokens=output,
    )


def test_tenants_are_charged_gpu_seconds_on_the_kind_that_served_them() -> None:
    seen = Forecast(ttft_s=0.5, ttft_spread=0.05)
    charged = {}
    for accelerator in ("H100-SXM", "L40S"):
        gate = SloGate(DEFAULT_CLASSES)
        q = _request("a", 8_000, 200)
        gate.dispatched(accelerator, q, 0.0, seen, state=_replica(accelerator), cached_tokens=6_000)
        gate.finished("a", 200, q)
        charged[accelerator] = gate.vtc.counters["a"]
        expected = gpu_rates(accelerator, "llama-3-8b", 1).request(8_000, 6_000, 200)
        assert charged[accelerator] == pytest.approx(expected, rel=1e-9)
    assert charged["L40S"] > charged["H100-SXM"]


def test_equal_gpu_time_leaves_two_differently_shaped_tenants_level() -> None:
    """A reasoning tenant (short prompts, long answers) and a code tenant (long prompts, short
    completions) each served the same GPU-seconds stand level; counted in weighted tokens the
    code tenant would stand far over its share."""
    gate = SloGate(DEFAULT_CLASSES)
    gate.set_credits({"reasoning": 0.5, "code": 0.5})
    rates = gpu_rates("H100-SXM", "llama-3-8b", 1)
    h100 = _replica("H100-SXM")
    seen = Forecast(ttft_s=0.5, ttft_spread=0.05)
    per_reasoning = rates.request(56, 0, 980)
    per_code = rates.request(2_048, 0, 28)
    n_code = round(10 * per_reasoning / per_code)  # as many GPU-seconds as 10 reasoning requests
    # one request each that never finishes keeps both active
    keep = {"reasoning": _request("reasoning", 8, 1), "code": _request("code", 8, 1)}
    for q in keep.values():
        gate.dispatched("h", q, 0.0, seen, state=h100)
    for tenant, prompt, output, n in (("reasoning", 56, 980, 10), ("code", 2_048, 28, n_code)):
        for _ in range(n):
            q = _request(tenant, prompt, output)
            gate.dispatched("h", q, 0.0, seen, state=h100)
            gate.finished(tenant, output, q)
    counters = gate.vtc.counters
    assert counters["code"] == pytest.approx(counters["reasoning"], rel=0.1)
    tokens = VirtualTokenCounter(credit_weights={"reasoning": 0.5, "code": 0.5})
    for tenant in keep:
        tokens.start(tenant, 8)
    for tenant, prompt, output, n in (("reasoning", 56, 980, 10), ("code", 2_048, 28, n_code)):
        for _ in range(n):
            tokens.start(tenant, prompt)
            tokens.finish(tenant, output)
    assert tokens.counters["code"] > 5 * tokens.counters["reasoning"]


def test_the_gate_can_charge_weighted_tokens_instead_and_refuses_other_units() -> None:
    gate = SloGate(DEFAULT_CLASSES, charge="tokens")
    q = _request("a", 1_000, 10)
    gate.dispatched("h", q, 0.0, Forecast(ttft_s=0.5, ttft_spread=0.05), state=_replica("L40S"))
    gate.finished("a", 10, q)
    assert gate.vtc.counters["a"] == pytest.approx(1_000 + 2 * 10)
    with pytest.raises(InputError) as err:
        SloGate(DEFAULT_CLASSES, charge="dollars")
    assert err.value.field == "charge"


def test_a_long_answer_is_charged_at_dispatch_and_settled_at_completion() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    rates = gpu_rates("L40S", "llama-3-8b", 1)
    q = _request("a", 100, 1_000)
    gate.dispatched("l", q, 0.0, Forecast(ttft_s=0.5, ttft_spread=0.05), state=_replica("L40S"))
    # while it decodes its tenant already stands charged for the answer it asked for
    assert gate.vtc.counters["a"] == pytest.approx(rates.request(100, 0, 1_000))
    gate.finished("a", 300, q)  # it stopped early: settled for what it generated
    assert gate.vtc.counters["a"] == pytest.approx(rates.request(100, 0, 300))


def test_with_a_credit_slack_a_tenant_far_ahead_yields_under_pressure_only() -> None:
    gate = SloGate(DEFAULT_CLASSES, credit_slack=1.0)
    gate.set_credits({"ahead": 0.5, "owed": 0.5})
    h100 = _replica("H100-SXM")
    sure = Forecast(ttft_s=0.3, ttft_spread=0.05)
    for tenant, output in (("owed", 10), ("ahead", 20_000)):  # both in flight
        gate.dispatched("h", _request(tenant, 100, output), 0.0, sure, state=h100)
    assert gate.vtc.lead("ahead") > 1.0
    assert gate.judge("ahead", "interactive", sure)  # room for all
    _overload(gate)
    assert not gate.judge("ahead", "interactive", sure)
    assert gate.last.rule == CREDIT
    assert gate.judge("owed", "interactive", sure)


def test_the_gate_learns_a_replicas_decodes_from_its_completions() -> None:
    """Short decodes that kept missing their TPOT on an L40S raise the chance the gate gives
    the next one there when it chooses a replica (not when it judges a refusal); decodes of
    another length, or on another replica, learn apart."""
    gate = SloGate(DEFAULT_CLASSES)
    l40s = _replica("L40S")
    query = _request("a", 1_000, 12)
    before = gate.forecast_on(l40s, "l", 0.2, query, 0.0)
    assert before.observed is None
    for k in range(40):
        q = _request("a", 1_000, 12)
        now = float(k)
        seen = gate.forecast_on(l40s, "l", 0.2, q, now)
        gate.dispatched("l", q, now, seen, state=l40s)
        gate.first_token(q, now + 0.2)
        gate.finished("a", 12, q, now + 0.2 + 11 * 0.16)  # full chunks in every iteration
    after = gate.forecast_on(l40s, "l", 0.2, query, 40.0)
    assert after.observed is not None and after.observed.total > 20
    assert after.tpot_miss(0.1, observed=True) > 0.9 > before.tpot_miss(0.1) + 0.5
    assert after.tpot_miss(0.1) == pytest.approx(before.tpot_miss(0.1), abs=0.05)
    assert gate.judge("a", "interactive", after, 40.0)  # the model alone: admitted
    assert gate.forecast_on(l40s, "other", 0.2, query, 40.0).observed is None
    assert gate.forecast_on(l40s, "l", 0.2, _request("a", 1_000, 800), 40.0).observed is None


def test_past_capacity_a_replicas_observed_decodes_count_in_the_judgement_too() -> None:
    """Past capacity the gate refuses what is more likely to miss than meet, and there the
    replica's observed share of short decodes that missed counts: a request admitted to a
    replica where most of them miss holds capacity a likelier request would use."""
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0)
    l40s = _replica("L40S")
    for k in range(40):
        q = _request("a", 1_000, 12)
        now = float(k)
        seen = gate.forecast_on(l40s, "l", 0.2, q, now)
        gate.dispatched("l", q, now, seen, state=l40s)
        gate.first_token(q, now + 0.2)
        gate.finished("a", 12, q, now + 0.2 + 11 * 0.16)
    after = gate.forecast_on(l40s, "l", 0.2, _request("a", 1_000, 12), 40.0)
    assert after.tpot_miss(0.1) < DEFAULT_OVERLOAD_REFUSE_AT < after.tpot_miss(0.1, observed=True)
    assert gate.judge("a", "interactive", after, 40.0)  # keeping up: the model alone
    _overload(gate)
    assert not gate.judge("a", "interactive", after, 40.0)
    assert gate.last.rule == TPOT


def test_a_retried_request_is_refused_once_and_keeps_the_pressure_on() -> None:
    """A flow-control queue tries what waits again many times a second: the tries are not
    counted as refusals again, but the overload signal lasts as long as they are refused."""
    late = Forecast(ttft_s=5.0, ttft_spread=0.05)
    gate = SloGate(DEFAULT_CLASSES)
    assert not gate.judge("a", "interactive", late, 0.0)
    first = gate.pressure
    assert first > 0.0 and gate.refused[("a", "interactive")] == 1
    for i in range(1, 200):
        assert not gate.judge("a", "interactive", late, i * 0.02, retry=True)
        assert gate.last.rule == TTFT
    assert gate.refused[("a", "interactive")] == 1
    assert gate.pressure > 0.5 > first


def test_the_judgement_names_the_replica_judged_the_second_looks_when_it_goes_there() -> None:
    fleet = states(2)
    path = make_path(fleet)
    c = chain(7)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]))]))
    gate = SloGate(DEFAULT_CLASSES)
    assert gate.admit_decision(path, query(c), path.decide(query(c), NOW), NOW) is not None
    assert (gate.last.rule, gate.last.replica_id) == (ADMITTED, "r0")
    fleet[0].in_flight_prefill_tokens = 400_000  # the planned replica is far behind
    admitted = gate.admit_decision(path, query(c), path.decide(query(c), NOW), NOW)
    assert admitted is not None and gate.last.replica_id == admitted.replica_id == "r1"
    assert gate.last_decision == admitted
    assert gate.judge("acme", "interactive", _decoding(0.01, 0.02, gaps=1, queued=0.0))
    assert gate.last.replica_id == ""  # judged with no replica named


def _held_prefix_and_a_busy_replica(
    blocks: int, other_queue: int, share: float | None = 0.5
) -> tuple[SloGate, bool, str]:
    """A request whose ``blocks``-block prefix the plan keeps on r0, far behind; r1 has
    ``other_queue`` prompt tokens queued; the gate's ``cold_move_ttft_share`` is ``share``.
    Whether the gate admits it, and where it judged it."""
    fleet = states(2)
    path = make_path(fleet)
    c = chain(*range(1, blocks + 1))
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]), warm=["r0"])]))
    fleet[0].in_flight_prefill_tokens = 400_000
    fleet[1].in_flight_prefill_tokens = other_queue
    gate = SloGate(DEFAULT_CLASSES, cold_move_ttft_share=share)
    q = query(c, tokens=blocks * 16 + 800)
    decision = path.decide(q, NOW)
    assert (decision.replica_id, decision.cached_tokens) == ("r0", blocks * 16)
    admitted = gate.admit_decision(path, q, decision, NOW)
    return gate, admitted is not None, gate.last.replica_id


def test_the_second_look_does_not_load_a_held_prefix_cold_where_there_is_no_prefill_to_spare() -> (
    None
):
    # 3,200 prefix tokens held on r0; on r1 they would load cold behind 50k queued tokens (a
    # first token ~1.3 s away, past half the 2-s SLO): no way out, refused where it is
    gate, admitted, where = _held_prefix_and_a_busy_replica(200, 50_000)
    assert not admitted and where == "r0" and gate.last.rule == TTFT
    # the same move onto a replica with the prefill to spare is taken
    _, admitted, where = _held_prefix_and_a_busy_replica(200, 0)
    assert admitted and where == "r1"
    # a small prefix (64 tokens) loads cold anywhere: the move is taken as before
    _, admitted, where = _held_prefix_and_a_busy_replica(4, 50_000)
    assert admitted and where == "r1"
    # off by default: the second look moves it as before
    _, admitted, where = _held_prefix_and_a_busy_replica(200, 50_000, share=None)
    assert admitted and where == "r1"
    with pytest.raises(InputError, match="cold_move_ttft_share"):
        SloGate(DEFAULT_CLASSES, cold_move_ttft_share=0.0)


def test_cold_move_crowds_counts_the_cold_tokens_and_the_ttft_there() -> None:
    def decision(replica: str, cached: int, ttft: float) -> Decision:
        return Decision(
            replica_id=replica,
            address=replica,
            reason="plan",
            plan_version=1,
            predicted_ttft_s=ttft,
            cached_tokens=cached,
        )

    held = decision("r0", 4096, 5.0)
    assert cold_move_crowds(held, decision("r1", 0, 1.5), 1.0)
    assert not cold_move_crowds(held, decision("r1", 0, 0.9), 1.0)  # prefill to spare
    assert not cold_move_crowds(held, decision("r1", 4096, 1.5), 1.0)  # held there too
    assert not cold_move_crowds(held, decision("r1", 3072, 1.5), 1.0)  # 1,024 cold: small


def test_a_judgement_held_to_a_lower_threshold_refuses_a_doubtful_request() -> None:
    doubtful = Forecast(ttft_s=2.1, ttft_spread=0.5)  # a little more likely to miss than meet
    assert SloGate(DEFAULT_CLASSES).judge("acme", "interactive", doubtful)
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0)  # no lift for tenants owed credit
    assert not gate.judge("acme", "interactive", doubtful, refuse_at=0.5)
    assert gate.last.rule == TTFT and gate.last.threshold == 0.5


def _fed(tpot_by_work: bool, cached: int, slower: float, *, tpot_computed: bool = False) -> SloGate:
    """A gate that sent an A100 a stream of 8k-token prompts, ``cached`` tokens of each a
    prefix held there, whose 300-token decodes ran ``slower`` × their forecast TPOT."""
    gate = SloGate(DEFAULT_CLASSES, tpot_by_work=tpot_by_work, tpot_computed=tpot_computed)
    a100 = dataclasses.replace(
        _replica("A100-80G"), num_requests_running=20, in_flight=20, kv_cache_usage_perc=0.3
    )
    for k in range(100):
        q, now = _request("a", 8_000, 300), k * 0.25
        seen = gate.forecast_on(a100, "a", 0.3, q, now, cached_tokens=cached)
        gate.dispatched("a", q, now, seen, state=a100, cached_tokens=cached)
        gate.first_token(q, now + 0.3)
        gate.finished("a", 300, q, now + 0.3 + 299 * seen.tpot_s * slower)
    return gate


def _next(gate: SloGate) -> Forecast:
    a100 = dataclasses.replace(
        _replica("A100-80G"), num_requests_running=20, in_flight=20, kv_cache_usage_perc=0.3
    )
    return gate.forecast_on(a100, "a", 0.3, _request("a", 500, 100), 25.0)


def test_the_tpot_forecast_by_work_counts_what_the_replica_computes() -> None:
    """Off (the default), a prompt counts whole in the prompt rate, cached or not, and no TPOT
    ratio is learned: the forecast is the one a gate that never heard of the cache makes. By
    work, the 7k-token prefix each prompt finds cached is no prompt work: the A100 that looked
    prefill-bound (29k tok/s received) has 3.6k tok/s to compute, each token at its attention
    over the cached context too, and the decodes' TPOT ratio (1.5× their forecast) is
    learned."""
    off = _next(_fed(False, cached=7_000, slower=1.5))
    assert off == _next(_fed(False, cached=0, slower=1.5))
    assert off.tpot_ratio == 1.0
    limit = DEFAULT_CLASSES["interactive"].tpot_slo_s
    assert off.tpot_miss(limit) > 0.9

    on = _next(_fed(True, cached=7_000, slower=1.5))
    assert on.prompt_rate == pytest.approx(off.prompt_rate / 8, rel=0.02)
    table = decode_step_table("A100-80G", "llama-3-8b", 1)
    per_token = (on.full_step_s - on.step_s) / on.budget_tokens
    assert per_token > table.prefill_s_per_token  # attention over the 7k cached
    assert 1.3 < on.tpot_ratio < 1.5  # shrunk toward 1 by the prior
    assert on.tpot_miss(limit) < 0.5 < off.tpot_miss(limit)
    # the same replica, decodes as forecast: the ratio stays near 1 and the chance lower still
    even = _next(_fed(True, cached=7_000, slower=1.0))
    assert even.tpot_ratio == pytest.approx(1.0, abs=0.01)
    assert even.tpot_miss(limit) < on.tpot_miss(limit)


def test_the_tpot_forecast_in_tokens_computed_leaves_the_cached_prefix_out() -> None:
    """With ``tpot_computed`` the 7k-token prefix each prompt finds cached is no prompt work,
    as by work, but each computed token costs the kind's own prefill time (no attention over
    the cached context, no TTFT ratio) and no TPOT ratio is learned: the A100 that looked
    prefill-bound is not, and a decode that would miss as received is judged safe."""
    limit = DEFAULT_CLASSES["interactive"].tpot_slo_s
    off = _next(_fed(False, cached=7_000, slower=1.5))
    on = _next(_fed(False, cached=7_000, slower=1.5, tpot_computed=True))
    assert on.prompt_rate == pytest.approx(off.prompt_rate / 8, rel=0.02)
    table = decode_step_table("A100-80G", "llama-3-8b", 1)
    per_token = (on.full_step_s - on.step_s) / on.budget_tokens
    assert per_token == pytest.approx(table.prefill_s_per_token)
    assert on.tpot_ratio == 1.0
    assert on.tpot_miss(limit) < 0.1 < 0.9 < off.tpot_miss(limit)
    # nothing cached: the tokens computed are the tokens received, and the forecast the same
    # but for the TTFT ratio, which no longer scales the prompt work
    bare = _next(_fed(False, cached=0, slower=1.5, tpot_computed=True))
    assert bare.prompt_rate == pytest.approx(off.prompt_rate)
    assert bare.full_step_s == pytest.approx(off.full_step_s)
    # by work as well: by work prevails (its attention cost and TPOT ratio)
    both = _next(_fed(True, cached=7_000, slower=1.5, tpot_computed=True))
    assert both == _next(_fed(True, cached=7_000, slower=1.5))


def _lora_path(n: int = 2):
    import dataclasses

    fleet = [dataclasses.replace(s, max_loras=2) for s in states(n)]
    return fleet, make_path(fleet)


def _adapter_query(adapter: str, tokens: int = 200) -> RouteQuery:
    import dataclasses

    return dataclasses.replace(query(tokens=tokens), adapter=adapter)


def test_requests_waiting_for_a_lora_slot_are_not_queued_ahead_of_a_base_request() -> None:
    fleet, path = _lora_path(1)
    gate = SloGate(DEFAULT_CLASSES)
    base = query(tokens=200)
    decision = path.decide(base, NOW)
    clear = gate.forecast(path, base, decision, NOW).ttft_s
    # 200k prompt tokens in flight, all of requests waiting for a slot: the route path's own
    # prediction counts them (a replica swapping adapters is load), the gate's forecast not
    fleet[0].in_flight_prefill_tokens = 200_000
    fleet[0].slot_waiting_requests, fleet[0].slot_waiting_tokens = 100, 200_000
    behind = path.decide(base, NOW)
    assert behind.predicted_ttft_s > 10 * decision.predicted_ttft_s
    assert gate.forecast(path, base, behind, NOW).ttft_s == pytest.approx(clear)
    fleet[0].slot_waiting_requests, fleet[0].slot_waiting_tokens = 50, 100_000
    assert gate.forecast(path, base, path.decide(base, NOW), NOW).ttft_s > 5 * clear


def test_the_wait_for_a_slot_is_forecast_and_calibrated_apart_from_the_prefill() -> None:
    _fleet, path = _lora_path(1)
    gate = SloGate(DEFAULT_CLASSES)
    q = _adapter_query("cold")
    plain = path.decide(q, NOW)
    waiting = Decision(
        replica_id=plain.replica_id,
        address=plain.address,
        reason=plain.reason,
        plan_version=None,
        predicted_ttft_s=plain.predicted_ttft_s,
        slot_wait_s=3.0,
    )
    seen = gate.forecast(path, q, waiting, NOW)
    assert seen.ttft_s == pytest.approx(gate.forecast(path, q, plain, NOW).ttft_s + 3.0)
    assert not gate.admit_decision(path, q, waiting, NOW)  # 3 s of slot wait: misses 2 s
    assert gate.last.rule == TTFT
    # three keys: the base model's, the adapters', the slot-waiting adapters'
    r = plain.replica_id
    keys = {calibration_key(r), calibration_key(r, "x"), calibration_key(r, "x", 1.0)}
    assert len(keys) == 3 and calibration_key(r) == r
    # slot waits that come in at a third of their forecast teach their own key only
    for _ in range(200):
        gate.calibration.observe(calibration_key(r, "x", 1.0), 3.0, 1.0)
    assert gate.calibration.ratio(calibration_key(r, "x", 1.0)) < 0.4
    assert gate.calibration.ratio(r) == gate.calibration.ratio(calibration_key(r, "x")) == 1.0
    assert gate.admit_decision(path, q, waiting, NOW) is not None


def test_a_slot_wait_is_forecast_by_the_queue_for_a_slot_until_the_fleet_is_past_capacity() -> None:
    _fleet, path = _lora_path(1)
    gate = SloGate(DEFAULT_CLASSES)
    q = _adapter_query("cold")
    plain = path.decide(q, NOW)

    def waiting(rate_wait_s: float) -> Decision:
        """Two handovers to wait for; at the recent release rate, ``rate_wait_s``."""
        return dataclasses.replace(plain, slot_wait_s=rate_wait_s, slot_handovers=2)

    alone = gate.forecast(path, q, plain, NOW).ttft_s
    r = plain.replica_id
    by_rate = calibration_key(r, "cold", 3.0)
    by_queue = calibration_key(r, "cold", 0.5, by_queue=True)
    # until the queue's calibration has learned from slot waits, the release rate's forecast
    assert gate.forecast(path, q, waiting(3.0), NOW).slot_wait_s == 3.0
    for _ in range(10):
        gate.calibration.observe(by_queue, 1.0, 1.0)  # slot waits that came as forecast
    assert gate.calibration.weight(by_queue) >= SLOT_QUEUE_MIN_WEIGHT_S2
    # then, while the fleet keeps up: by its place in the queue (a rate read off a few bursty
    # frees said 3 s)
    seen = gate.forecast(path, q, waiting(3.0), NOW)
    assert seen.slot_wait_s == pytest.approx(2 * SLOT_HANDOVER_S)
    assert seen.slot_rate_wait_s == 3.0
    assert seen.ttft_s == pytest.approx(alone + 2 * SLOT_HANDOVER_S)
    # before the replica's slots have turned over (no rate yet) the wait is unknown: none
    assert gate.forecast(path, q, waiting(0.0), NOW).slot_wait_s == 0.0
    # fully past capacity: at the recent release rate, which reads a slowdown at once
    gate.pressure = 2 * PRESSURE_FLOOR
    assert gate.forecast(path, q, waiting(3.0), NOW).slot_wait_s == 3.0
    assert not gate.admit_decision(path, q, waiting(3.0), NOW)  # 3 s for a slot: misses 2 s
    gate.pressure = PRESSURE_FLOOR  # the threshold on its way down: still by the queue
    assert gate.forecast(path, q, waiting(3.0), NOW).slot_wait_s == pytest.approx(0.5)
    # the two forecasts are calibrated apart, and each learns from every slot-waiting request
    assert len({by_rate, by_queue, calibration_key(r, "cold"), r}) == 4
    gate.pressure = 0.0
    assert gate.admit_decision(path, q, waiting(3.0), NOW) is not None
    queue_ratio = gate.calibration.ratio(by_queue)
    gate.first_token(q, NOW + 1.0)  # its slot came after 1 s
    assert gate.calibration.ratio(by_rate) < 1.0
    assert gate.calibration.ratio(by_queue) > queue_ratio
    assert gate.calibration.ratio(r) == gate.calibration.ratio(calibration_key(r, "cold")) == 1.0


def test_the_second_look_leaves_an_adapter_request_where_the_plan_sent_it() -> None:
    fleet, path = _lora_path(2)
    gate = SloGate(DEFAULT_CLASSES)
    fleet[0].in_flight_prefill_tokens = 400_000  # r0 far behind, r1 idle
    base, lora = query(tokens=200), _adapter_query("a")
    on_r0 = path.decide(base, NOW)
    on_r0 = Decision(
        replica_id="r0",
        address=on_r0.address,
        reason=on_r0.reason,
        plan_version=None,
        predicted_ttft_s=10.0,  # behind 400k tokens
    )
    moved = gate.admit_decision(path, base, on_r0, NOW)
    assert moved is not None and moved.replica_id == "r1"  # a base request moves
    lora_on_r0 = Decision(
        replica_id="r0",
        address=on_r0.address,
        reason=on_r0.reason,
        plan_version=None,
        predicted_ttft_s=10.0,
    )
    assert gate.admit_decision(path, lora, lora_on_r0, NOW) is None
    assert gate.last.replica_id == "r0"  # judged where it was sent, and refused there


def test_with_a_credit_reserve_a_tenant_over_its_share_queues_only_where_those_owed_have_room() -> (
    None
):
    """Past capacity the tenant furthest over its share is judged against a TTFT limit
    shortened by the reserve (a refusal for credit where the full limit would admit it); the
    most owed tenant keeps the full limit; while the fleet keeps up nobody is held back."""
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0, credit_reserve=0.5)
    gate.set_credits({"owed": 0.5, "greedy": 0.5})
    gate.started("owed", 100)
    gate.started("greedy", 100_000)  # far over its share now
    queued = Forecast(ttft_s=1.5, ttft_spread=0.05)  # meets 2 s, not the reserve's 1 s
    assert gate.reserve("greedy") == 0.0  # no pressure
    assert gate.judge("greedy", "interactive", queued)
    _overload(gate)
    assert gate.reserve("greedy") == pytest.approx(0.5)
    assert gate.reserve("owed") == 0.0
    pressure = gate.pressure
    assert not gate.judge("greedy", "interactive", queued)
    assert gate.last.rule == CREDIT
    assert gate.pressure < pressure  # a refusal for credit is no sign of overload
    assert gate.judge("owed", "interactive", queued)
    # a short queue leaves room for both
    assert gate.judge("greedy", "interactive", Forecast(ttft_s=0.5, ttft_spread=0.05))
    # what would miss even the full limit is refused for its SLO, as without the reserve
    assert not gate.judge("greedy", "interactive", Forecast(ttft_s=3.0, ttft_spread=0.05))
    assert gate.last.rule == TTFT


def test_without_a_credit_reserve_judgements_do_not_change() -> None:
    plain, zero = SloGate(DEFAULT_CLASSES), SloGate(DEFAULT_CLASSES, credit_reserve=0.0)
    for gate in (plain, zero):
        gate.set_credits({"owed": 0.5, "greedy": 0.5})
        gate.started("owed", 100)
        gate.started("greedy", 100_000)
        _overload(gate)
    for ttft in (0.5, 1.5, 1.95, 2.05, 3.0):
        seen = Forecast(ttft_s=ttft, ttft_spread=0.05)
        assert plain.judge("greedy", "interactive", seen) == zero.judge(
            "greedy", "interactive", seen
        )
        assert plain.last == zero.last


def _two_pools(by_model: bool) -> tuple[SloGate, PlacementRoutePath, RouteQuery, Decision]:
    """Two 8B replicas far behind (every 8B request refused: that pool is past capacity) and a
    70B replica with room; a gate that refused 300 8B requests, and a 70B request forecast at
    2.2 s against its 2 s SLO (~65% likely to miss: admitted at ``refuse_at``, refused at the
    overload threshold)."""
    small = states(2)
    fleet = [*small, *states(1, model="llama-3-70b", prefix="b")]
    path = make_path(fleet)
    path.install_plan(plan(fleet))
    for s in small:
        s.in_flight_prefill_tokens = 400_000
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0, pressure_by_model=by_model)
    for k in range(300):
        small_q = query(tenant="x")
        assert gate.admit_decision(path, small_q, path.decide(small_q, NOW), NOW + k) is None
    big = query(model="llama-3-70b")
    doubtful = dataclasses.replace(path.decide(big, NOW), predicted_ttft_s=2.2)
    assert doubtful.replica_id == "b0"
    chance = gate.forecast(path, big, doubtful, NOW).miss(2.0, 0.1, observed=True)
    assert DEFAULT_OVERLOAD_REFUSE_AT < chance < DEFAULT_REFUSE_AT
    return gate, path, big, doubtful


def test_a_70b_request_is_judged_by_its_pool_not_by_the_8b_pools_overload() -> None:
    gate, path, big, doubtful = _two_pools(by_model=True)
    pressures = gate.signals.pressures()
    assert pressures["llama-3-8b"] > 0.9 and pressures["llama-3-70b"] == 0.0
    assert gate.admit_decision(path, big, doubtful, NOW + 300) is not None
    assert gate.last.threshold == pytest.approx(DEFAULT_REFUSE_AT)
    assert gate.pressure == 0.0  # the pool judged: the 70B's
    # an 8B request as doubtful is refused at its pool's overload threshold
    small = query()
    assert not gate.admit_decision(
        path, small, dataclasses.replace(path.decide(small, NOW), predicted_ttft_s=2.2), NOW + 301
    )
    assert gate.last.threshold == pytest.approx(DEFAULT_OVERLOAD_REFUSE_AT)
    assert gate.pressure > 0.9


def test_with_one_signal_for_the_fleet_the_8b_pools_overload_refuses_the_70b_request() -> None:
    gate, path, big, doubtful = _two_pools(by_model=False)
    assert gate.admit_decision(path, big, doubtful, NOW + 300) is None
    assert gate.last.rule == TTFT
    assert gate.last.threshold == pytest.approx(DEFAULT_OVERLOAD_REFUSE_AT)
    assert list(gate.signals.pressures()) == [""]


def test_on_one_model_the_signal_per_pool_is_the_fleet_wide_one_to_the_digit() -> None:
    """The same judgements of one model's requests, over a run that goes past capacity and
    back, by a gate keeping its signals per pool and by one keeping one for the fleet: every
    rule, threshold, pressure and strict share equal (not approximately: exactly)."""
    per_pool = SloGate(DEFAULT_CLASSES, strict_refuse_at=0.3, pressure_by_model=True)
    fleet_wide = SloGate(DEFAULT_CLASSES, strict_refuse_at=0.3)
    assert not fleet_wide.signals.by_model  # the default
    strict = 0.0
    for k in range(600):
        ttft = 1.0 + 2.0 * ((k * 37) % 100) / 100 * (1.5 if 150 < k < 400 else 0.8)
        seen = _decoding(L40S_STEP, L40S_FULL, gaps=4, queued=float((k * 911) % 30_000))
        seen = dataclasses.replace(seen, ttft_s=ttft)
        cls = "batch" if k % 7 == 0 else "interactive"
        now = 10.0 + 0.013 * k
        a = per_pool.judge(f"t{k % 3}", cls, seen, now, model="llama-3-8b")
        b = fleet_wide.judge(f"t{k % 3}", cls, seen, now, model="llama-3-8b")
        assert (a, per_pool.last) == (b, fleet_wide.last)
        assert per_pool.pressure == fleet_wide.pressure
        assert per_pool.ttft_pressure == fleet_wide.ttft_pressure
        strict = max(strict, per_pool.strictness())
    assert strict == 1.0  # the run did go past capacity, into the strict regime


def _share_gate(**kw: float) -> tuple[SloGate, ReplicaState]:
    """A gate with a share cap of 1.5 where, over the last 20 s on one 8B replica, "greedy"
    (credit 0.5) was served all it asked and "owed" (credit 0.5) a quarter of it."""
    gate = SloGate(DEFAULT_CLASSES, credit_cut=0.0, share_cap=1.5, share_window_s=30.0, **kw)
    gate.set_credits({"greedy": 0.5, "owed": 0.5})
    h100 = _replica("H100-SXM")
    sure = Forecast(ttft_s=0.3, ttft_spread=0.05)
    for k in range(20):
        now = float(k)
        for tenant, served in (("greedy", 4), ("owed", 1)):
            for i in range(4):
                q = _request(tenant, 2_000, 100)
                cost = gate.default_rates.request(q.input_tokens, 0, q.max_output_tokens)
                gate.judge(tenant, "interactive", sure, now, model="llama-3-8b", cost=cost)
                if i < served:
                    gate.dispatched("H100-SXM", q, now, sure, state=h100)
    return gate, h100


def test_with_a_share_cap_a_tenant_past_it_in_its_pool_yields_under_pressure_only() -> None:
    gate, _ = _share_gate()
    sure = Forecast(ttft_s=0.3, ttft_spread=0.05)
    assert gate.share_cap is not None
    assert gate.share_cap.ratio("llama-3-8b", "greedy", gate.vtc.credit_weight, 20.0) > 1.5
    assert gate.judge("greedy", "interactive", sure, 20.0, model="llama-3-8b")  # room for all
    _overload(gate)
    assert not gate.judge("greedy", "interactive", sure, 20.0, model="llama-3-8b")
    assert gate.last.rule == CREDIT
    # told to come back once its recent service has decayed under the cap, not the queue's wait
    ratio = gate.share_cap.ratio("llama-3-8b", "greedy", gate.vtc.credit_weight, 20.0)
    assert gate.retry_after_s == max(1, math.ceil(30.0 * math.log(ratio / 1.5)))
    assert gate.judge("owed", "interactive", sure, 20.0, model="llama-3-8b")
    # another model's pool: nobody is owed there
    assert gate.judge("greedy", "interactive", sure, 20.0, model="llama-3-70b")


def test_the_share_cap_counts_what_a_tenant_asked_of_the_gate_not_its_retries() -> None:
    gate = SloGate(DEFAULT_CLASSES, share_cap=1.0)
    gate.set_credits({"a": 0.5, "b": 0.5})
    sure = Forecast(ttft_s=0.3, ttft_spread=0.05)
    assert gate.share_cap is not None
    shares = gate.share_cap
    gate.judge("a", "interactive", sure, 1.0, model="llama-3-8b", cost=1.0)
    gate.judge("a", "interactive", sure, 1.0, model="llama-3-8b", cost=1.0, retry=True)
    gate.judge("a", "interactive", sure, 1.0, model="llama-3-8b")  # no price given
    unreachable = Forecast(ttft_s=30.0, ttft_spread=0.05, own_s=30.0, wait_s=0.0)
    assert not gate.judge("a", "interactive", unreachable, 1.0, model="llama-3-8b", cost=9.0)
    assert gate.last.rule == UNREACHABLE
    shares.serve("llama-3-8b", "a", 1.0, 1.0)
    shares.offer("llama-3-8b", "b", 10.0, 1.0)
    shares.serve("llama-3-8b", "b", 3.0, 1.0)
    # a asked 1 (its first try alone) and got it, so b is entitled to the other 3 served; had
    # the retry or the unreachable request counted, a would be owed 2 and b held to 2 (1.5×)
    assert shares.ratio("llama-3-8b", "b", gate.vtc.credit_weight, 1.0) == pytest.approx(1.0)


def test_the_gate_charges_the_share_cap_what_it_dispatches_priced_on_the_replica() -> None:
    gate = SloGate(DEFAULT_CLASSES, share_cap=2.0)
    assert gate.share_cap is not None
    fleet = states(1)
    path = make_path(fleet)
    path.install_plan(plan(fleet))
    q = query(tenant="a")
    decision = path.decide(q, NOW)
    assert gate.admit_decision(path, q, decision, NOW) is not None
    s = fleet[0]
    price = gpu_rates(s.accelerator, s.model, s.tp).request(
        q.input_tokens, decision.cached_tokens, q.max_output_tokens
    )
    gate.share_cap.offer(q.model, "b", 3.0 * price, NOW)  # b asked thrice as much, refused
    gate.set_credits({"a": 0.5, "b": 0.5})
    # a was offered and served its request's price: entitled to half the served, 2× over
    assert gate.share_cap.ratio(q.model, "a", gate.vtc.credit_weight, NOW) == pytest.approx(2.0)


def test_without_a_share_cap_judgements_do_not_change() -> None:
    plain, capped = SloGate(DEFAULT_CLASSES), SloGate(DEFAULT_CLASSES, share_cap=None)
    assert capped.share_cap is None
    for gate in (plain, capped):
        gate.set_credits({"owed": 0.5, "greedy": 0.5})
        gate.started("owed", 100)
        gate.started("greedy", 100_000)
        _overload(gate)
    for ttft in (0.5, 1.5, 1.95, 2.05, 3.0):
        seen = Forecast(ttft_s=ttft, ttft_spread=0.05)
        args = ("greedy", "interactive", seen, 5.0)
        assert plain.judge(*args, cost=1.0) == capped.judge(*args, cost=1.0)
        assert plain.last == capped.last


def test_with_slot_turns_a_tenant_at_its_share_yields_its_adapters_slot_to_a_tenant_owed() -> None:
    """The tenant "greedy" (served past its share) runs its adapter on the one replica, whose slots an
    adapter of "owed" (below its share) has waited for: greedy's next request is refused for
    credit once owed has waited ``slot_turn_s``, so its adapter drains and hands the slot over."""
    gate, _ = _share_gate(slot_turn_s=1.0)
    fleet, path = _lora_path(1)
    replica = fleet[0]
    now = 20.0
    greedy = dataclasses.replace(_adapter_query("g-lora"), tenant="greedy")
    owed = dataclasses.replace(_adapter_query("o-lora"), tenant="owed")
    running = path.decide(greedy, now)
    assert running.slot_handovers == 0  # it holds a slot (or one is free)
    assert gate.pressure < PRESSURE_FLOOR  # the fleet keeps up: the share cap alone is idle
    assert gate.admit_decision(path, greedy, running, now) is not None  # nobody waits
    replica.slot_starved_since, replica.slot_starved_tenants = now - 0.5, ("owed",)
    assert gate.admit_decision(path, greedy, running, now) is not None  # not long enough yet
    replica.slot_starved_since = now - 1.5
    assert gate.admit_decision(path, greedy, running, now) is None
    assert gate.last.rule == CREDIT
    assert gate.retry_after_s == 1
    # an owed tenant's adapter keeps its slot; so does one whose tenant waits only on itself
    assert gate.admit_decision(path, owed, path.decide(owed, now), now) is not None
    replica.slot_starved_tenants = ("greedy",)
    assert gate.admit_decision(path, greedy, running, now) is not None
    # a request that itself waits for a slot has none to yield
    replica.slot_starved_tenants = ("owed",)
    waiting = dataclasses.replace(running, slot_handovers=2)
    assert not gate.owes_slot(path, greedy, waiting, now)
    assert gate.owes_slot(path, greedy, running, now)
    # without the setting, never
    plain, _ = _share_gate()
    assert not plain.owes_slot(path, greedy, running, now)


def test_slot_turns_need_a_share_cap_and_a_positive_wait() -> None:
    with pytest.raises(InputError, match="slot_turn_s"):
        SloGate(DEFAULT_CLASSES, slot_turn_s=1.0)
    with pytest.raises(InputError, match="slot_turn_s"):
        SloGate(DEFAULT_CLASSES, share_cap=1.5, slot_turn_s=0.0)


@pytest.mark.parametrize("engine", [False, True])
def test_with_the_engines_slot_wait_a_refusal_for_a_slot_alone_is_not_overload(
    engine: bool,
) -> None:
    gate = SloGate(DEFAULT_CLASSES, slot_wait_from_engine=engine)
    # 4 s forecast, 3.5 s of it the wait for a LoRA slot: 0.5 s without it meets the 2 s SLO
    for_a_slot = Forecast(ttft_s=4.0, ttft_spread=0.05, prior_ttft_s=4.0, slot_wait_s=3.5)
    for k in range(400):  # refused for 4 s, twice the TTFT SLO
        assert not gate.judge("a", "interactive", for_a_slot, now=11.0 + k * 0.01)
        assert gate.last.rule == TTFT
    if engine:
        assert gate.pressure == 0.0 and gate.ttft_pressure == 0.0
    else:
        assert gate.pressure > 0.5 and gate.ttft_pressure > 0.5
    # a refusal the queue would make without the slot wait still measures overload
    queued = dataclasses.replace(for_a_slot, slot_wait_s=0.5)
    for k in range(400):
        gate.judge("a", "interactive", queued, now=15.0 + k * 0.01)
    assert gate.pressure > 0.5
