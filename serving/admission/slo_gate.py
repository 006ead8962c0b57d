"""Admission by forecast latency: refuse a request when it would miss its SLO.

Past a replica's capacity at SLO every request it accepts waits longer than the one before,
and one that will miss its SLO only lengthens the wait of those behind it. The gate forecasts
what the request would see on the replica the route path chose (:mod:`serving.admission.
forecast`) — how likely it is to miss its TTFT and its TPOT there — and refuses it (429 with
Retry-After) when that chance is at least ``refuse_at`` (0.9: at most one refusal in ten
refuses a request that would have met):

- **TTFT**: the route path's prediction (own prefill of the *uncached* prompt — the prefix
  cached on that replica is discounted — plus the prompt tokens queued ahead), stretched by the
  decoders sharing every chunked-prefill iteration and calibrated on the replica's own first
  tokens (:mod:`serving.admission.ttft_calibration`), which also give its spread. A long
  prompt is judged by what it costs there, not by its length.
- **TPOT**: on a replica where a decode step carrying a full prompt chunk is slower than the
  TPOT SLO (an A100 or L40S; never an H100 serving an 8B model), the prompt work queued behind
  the request while it waits and arriving while it decodes shares its iterations; a short
  decode behind a backlog misses, a long one averages out (:func:`~serving.admission.
  forecast.Forecast.tpot_miss`).

Before refusing, and whenever the chosen replica's recent requests decoded slower than the
TPOT SLO, the gate looks once more (:meth:`SloGate.admit_decision`): the route path's choice
favours the replica holding the request's prefix, and a request too slow there may meet its
SLO on the fastest replica where it is likely to decode in time. Where to send it counts the
replicas' recent decodes of its length (:mod:`serving.admission.tpot_calibration`); whether
to refuse it counts them only past capacity (below): that share ranks replicas, not requests,
so while the fleet keeps up a refusal is judged by the model alone (judged by the blend, the
TPOT refusals' precision on the head of ``mixed`` at load 1.0 fell 0.92 → 0.53). The second
look can be kept (``cold_move_ttft_share``, off by default) from moving a request off the
replica holding its prefix onto one where the prefix loads cold, unless that replica has the
prefill to spare (:func:`cold_move_crowds`): the cold load takes the prefill of the requests
queued there and evicts another group's prefix. Without that way out, a request more likely to
miss than to meet is refused where it is. On ``kv-bound`` past the knee it keeps locality
(tail, load 3: +11% on h100x8, +5% on hetero), but loses 3–6% at load 4 (bench/RESULTS.md).

**Overload.** A fleet past its capacity is held at the queue the gate allows, so whatever that
queue's edge admits is a coin toss. While the share of SLO refusals (``pressure``, followed
over the tightest TTFT SLO of the non-sheddable classes: a shorter burst is what queues are
for) stays past :data:`PRESSURE_FLOOR`, the threshold falls to ``overload_refuse_at`` (0.5):
refuse what is more likely to miss than to meet — the capacity a refusal frees goes to a
request more likely to meet. Lower values hold the queues lower still (more goodput past
capacity, more refusals of requests that would have met at moderate load). There the TPOT
chance blends in the replica's observed decodes of the request's length: a replica where most
short decodes miss is one where an admitted one most likely wastes what it holds, and the
model alone (a Poisson stream of prompts) misses the bursts that cause it. On ``tiers`` (tail,
loads 3 / 4, one fixed route setting) the model alone admitted those and goodput fell from
49 / 50 to 37 / 36 req/s; the blend restores it, and moves the heads of ``mixed`` and of the
reasoning-vs-code mix by under 1% at loads 0.5–3 (bench/RESULTS.md).

**Per model pool** (``pressure_by_model``, off by default). A request goes only to the
replicas serving its model, so the gate can keep these signals per model
(:mod:`serving.admission.overload_signal`) and judge a request by its model's: the 7–8B pool's
overload then no longer lowers the 70B requests' threshold. On ``multi-model``'s tail the 70B
goodput rose past capacity (seed 1, loads 3 / 4: 13.6 / 15.0 → 16.5 / 19.2 req/s), but the
overloaded Llama pool, judged by its own refusals alone rather than diluted by the pools
keeping up, went strict sooner and lost more (−1.9% / −2.4% of the goodput), and Jain's index
at overload fell (0.494 → 0.461 on seed 0); a fleet serving one model is judged the same
either way, to the digit (bench/RESULTS.md).

**Strict, past capacity by the queue.** With ``strict_refuse_at`` set, the overload threshold
falls further, to ``strict_refuse_at`` (and owed tenants' lift to ``strict_credit_cut``), as far
as the share of refusals *led by the first token* (``ttft_pressure``: rules :data:`TTFT` and
:data:`UNREACHABLE`, followed like ``pressure``) stands past half the floor, fully at the floor
(:meth:`SloGate.strictness`). A queue that overflows is what a refusal relieves: the capacity it
frees serves the next request in line. A TPOT refusal does not count there: on a class whose
decodes miss their TPOT beside its own bursts of prompt chunks (``tiers``: code completions on
H100s, 40 ms against a 53-ms chunk step) the fleet is not past capacity, and refusing at a 0.3
chance there refuses requests that meet — and, counted in the overload signal, kept the strict
threshold on by its own refusals (``tiers`` tail at load 1: pressure past the floor at 59% of
interactive decisions with the strict threshold, 28% without; goodput −7%, refusal precision
0.77). Off by default; the loop tunes it on the head (``bench/loop/tuning.py``).

**LoRA slots.** A request for an adapter that must wait for a slot on its replica
(:mod:`serving.route.adapter_slots`) waits for as many slot handovers as there are adapters
waiting ahead of it, and its own. How long that takes is forecast two ways, each calibrated
apart on the replica's slot-waiting requests (:func:`calibration_key`), and both learn from
every such request's first token. At the recent release rate (the book's last frees) the
forecast reads a slowdown at once, which is what sheds load when the fleet is past capacity; but
frees come in bursts, and below capacity that rate's noise outweighed the signal: on the head
of ``multi-model`` at loads 1–1.5 a request's place in the queue ranked the requests that then
missed far better (of the 400 the gate was surest of, 96–99% missed, against 51–92% by the
rate), so until the fleet is fully past its capacity (``pressure`` below twice
:data:`PRESSURE_FLOOR`, where the threshold reaches its overload level) the wait is forecast by
the place in the queue: :data:`SLOT_HANDOVER_S` per handover, scaled by what the replica's
slot-waiting requests saw, once that calibration has learned from some
(:data:`SLOT_QUEUE_MIN_WEIGHT_S2`; a run past capacity starts with the rate's forecast, as
before). The refusals' precision on that head rose from 0.64 / 0.79 / 0.77 to 0.84 / 0.92 / 0.89
at loads 1 / 1.25 / 1.5 (bench/RESULTS.md). Before the replica's slots have turned over (no rate
yet) the wait is unknown and taken as none, by either forecast — unless the route profile sets
``lora_slots.censored_rate``: the book then reads the time it went without a free as a slow rate
(:mod:`serving.route.adapter_slots`). With ``slot_wait_from_engine`` (the route profile's
``lora_slots.engine_wait``) the route path's rate, and the handovers waited for, are the
engine's own as its scrapes list them (:mod:`serving.route.engine_slots`: an adapter leaving
the waiting list for the running list, over the time something waited), and a refusal the slot
wait alone makes (without it the chance of a miss is under the threshold) does not count in the
overload signals: it says that adapter has no slot, not that the fleet's queues overflow — fed
to the pressure, such refusals lowered the threshold for every request of the pool (on the head
of ``multi-model`` at 2.37, −9% goodput; bench/RESULTS.md). On by default (the profile's
default): on ``multi-model``'s tail goodput −0.6% to +8.2% by load (seeds 0 and 1), the worst
load's precision 0.749 → 0.769 on seed 0, 0.796 → 0.787 on seed 1.

**TPOT by work.** With ``tpot_by_work`` the TPOT forecast counts prompt work as the tokens each
replica must compute, at what a computed token cost a chunk there lately (its attention over
the cached context included), and corrects its steps by the replica's learned TPOT ratio
(:mod:`serving.admission.forecast`, "By work"). Off by default and not tuned by the loop: on
the head of ``kv-bound`` it made the TPOT refusals right (load 1.5: precision 0.16 → 0.81), but
not on its tail (0.09 → 0.20), where it lost 3–9% past the knee (loads 3–4), and it loses on
the heads of ``tiers`` and ``synthetic`` past capacity (bench/RESULTS.md).

**TPOT in tokens computed** (``tpot_computed``, off by default). The forecast by work's first
half alone: the prompt work reaching a replica counted as the tokens it must compute (the
prefix the route path expects cached there left out), each at the kind's own prefill time, no
TTFT calibration ratio and no learned TPOT ratio. As received, a multi-turn session's turn counts
its whole context; on ``synthetic`` over the heterogeneous fleet 37% of the prompt tokens the
A100s and L40S received were computed and their TTFT ratio stood at 1.2–1.5 (it learns waits:
it inflated the work it was to discount), so below the knee the TPOT rule refused long
interactive decodes there at a judged ≥ 0.9 chance of a miss of which 95–100% would have met
(tail, load 2: 139 refusals, precision 0.08; the gated service 1.5% below the ungated one).
Counting the computed tokens removes every one of them and gains on that tail (+1.8 / +2.2 /
+4.1% at loads 2 / 3 / 4), but its forecast is optimistic past the knee (admitted at a chance
under 0.1, 16% missed at the head's load 2 and 81% at 3) and the refusals it removes were
shedding long decodes off the slow kinds just there: on the heads of three seeds it lost
2.6–5.2% at load 2 and up to 12% at 3, and the tails of ``mixed`` and ``tiers`` over the same
fleet lost 3.7% at load 1.5 and 2.5% at 3 (bench/RESULTS.md). So it is a setting, off.

**The TPOT rule's two roles** (``tpot_shed_from``, off by default). Past the pressure floor the
TPOT chance is judged at the lowered thresholds too, and there a TPOT refusal is load shedding
as much as a forecast miss: the shadow runs find those refusals right 0.1–0.8 of the time
(``tiers`` tail at load 1: 377 at 0.77). With ``tpot_shed_from`` set, the TPOT chance alone
refuses only at ``refuse_at`` (a TPOT chance under it no longer counts in the judgement) while
the share of SLO refusals stays under ``tpot_shed_from``; from there to
:data:`TPOT_SHED_SPAN` times it the TPOT threshold falls to the one the TTFT chance is judged
at, and the rule sheds as before; until it sheds, a long decode is judged by the model alone (the
observed blend of long decodes lags). On the ``tiers`` tail at 0.05 it raised the gate's precision
at load 1 from 0.878 to 0.916, but left it at 0.88 at load 2 (there the shadow run's pressure
is past the span) and lost 2.8% / 2.2% of the goodput at loads 3 / 4; on ``kv-bound`` over the
heterogeneous fleet at 0.1 it lost 2.5% at load 1.5 and 4.8% at 4. Judging the TPOT by the
forecast by work (or with the prompt rate's own spread) below the signal and as received past
it did no better: the queue's signal never engages on ``tiers``, whose TPOT refusals keep
the queues short, and the forecast by work's head precision does not hold on the tails
(bench/RESULTS.md). So it is a setting, not tuned by the loop.

**Fairness.** Tenants are charged what their requests cost: GPU-seconds on the replica it goes
to (:mod:`serving.admission.cost`) of the prompt (its cached prefix discounted) and of the
output it asks for at dispatch, settled for the output generated at completion, into the
Virtual Token Counters. Under that pressure
tenants owed credit keep part of the way back to ``refuse_at`` (``credit_cut`` × how far down
the active tenants' counters they stand): the doubtful requests refused are those of the
tenants furthest over their share. Without pressure nobody is refused for credit: there is
room for all. With a finite ``credit_slack``, under pressure a tenant whose counter leads the
lowest active one by more than the slack is refused outright (rule :data:`CREDIT`), even what
would meet; off by default: on the head of the reasoning-vs-code mix at 2× overload it raised
Jain's index 0.82 → 0.91 but cost 13% of the goodput (the capacity the reasoning tenant yields
is not what the code tenant lacks: its short decodes miss their TPOT on the slower replicas).
With ``credit_reserve`` (off by default: 0), under pressure a tenant is judged against its TTFT
limit shortened by ``credit_reserve`` × its standing among the active tenants (0 the most owed,
1 the furthest over its share): it joins a queue only while its first token would still leave
that room, which the owed tenants' bursts then find. A request that would meet the full limit
but not its own is refused for credit (rule :data:`CREDIT`, not an SLO refusal: the pressure
does not feed on it). On ``chat-longdoc-code`` over the heterogeneous fleet (a code tenant whose
short decodes meet their TPOT only on the H100s, whose queues a long-document tenant's 12k-token
prompts fill) 0.5 raised Jain's index at 2× overload from 0.885 to 0.942 on the tail and lost
goodput at no load (bench/RESULTS.md); the loop offers it only when asked
(``bench/loop/tuning.py``).

**A share cap** (``share_cap``, off by default: None). The counters order tenants but their
distances are not rates, and the credit rules above read them as such: on ``multi-model``'s
tail at 2× overload the tenants served 3.4–3.7× their entitlement stood at 0.10–0.17 among the
active tenants (the top counter ~11,000 ahead of the lowest) and led by 1,200–1,900
GPU-seconds per share, the base-model tenant at its entitlement by up to 560 (the lowest
counter is that of a tenant of one-token answers that never idles, so every lead grows with
the run). With ``share_cap`` set, past the pressure floor a tenant whose cost served in its
model's pool over the last ``share_window_s`` exceeds ``share_cap`` × its credit-weighted
max-min entitlement to what that pool served (:mod:`serving.admission.share_cap`; each request
priced as its tenant is charged, what it asked counted whether admitted or not) is refused for
credit, with a Retry-After of when its recent service is back under the cap. Work-conserving: a
tenant is past its share only while another of its pool got less than it asked and less than
its own entitlement. At 1.5 over 30 s, on ``multi-model``'s tail at 2× overload the three went
to 0.95–1.9× and Jain's index from 0.506 to 0.745 with no load losing past 0.4%; it is off by
default because mixed over the heterogeneous fleet lost 2.1% at load 3 and on the hold-out seed
the index fell (a sparse reasoning tenant in a pool with room; bench/RESULTS.md).

**Slot turns** (``slot_turn_s``, off by default: None; needs the share cap). vLLM keeps an
adapter in its LoRA slot while any of its requests runs and lets the requests of adapters in
slots pass those waiting for one; so past the fleet's slot capacity an adapter whose requests
never pause never yields its slot, and the adapters without one — on ``multi-model`` at 2×
overload the light ones of small tenants, pinned as a replica's fifth or sixth adapter by a plan
made at lower load, or swapped among adapters that never pause — wait 3–11 s for their first
token whatever the gate admits. With ``slot_turn_s`` set, a request for an adapter that runs on
its replica, where an adapter of another tenant has waited for a slot at least that long
(:meth:`serving.route.adapter_slots.SlotBook.starved`), is refused for credit (rule
:data:`CREDIT`) when its tenant stands at or past its entitlement in the pool's share cap while
a waiting tenant stands below its own: the running adapter drains and hands its slot over.
Independent of ``pressure`` (the gate's pressure did not see these waits). The loop runs it at
:data:`DEFAULT_SLOT_TURN_S` wherever its head keeps the share cap: on ``multi-model``'s tail
(seed 0) Jain's index at 2× overload rose from 0.753 to 0.825 with no load of seed 0 or 1 below
−0.44%; fleets without LoRA slots cannot change (bench/RESULTS.md).

**Unreachable.** A request whose own prefill misses its TTFT SLO even with nothing queued ahead
(a very long uncached prompt on the fastest replica it may use) is refused for a miss no retry
can avoid: rule :data:`UNREACHABLE` (the service answers 429 ``slo_unreachable``: resend it in
a class with a longer TTFT SLO). With ``best_effort`` such a request is instead admitted while
the fleet keeps up (pressure below the floor), to be served late (:attr:`Judgement.best_effort`);
off by default: on Mooncake over the heterogeneous fleet serving them late cost 12–17% of the
goodput at loads 1.5–2.

Each judgement is kept in :attr:`SloGate.last` (the rule, the chance of a miss, the threshold,
the forecast), and a refusal sets :attr:`SloGate.retry_after_s`: the seconds until what is
queued ahead of the request on that replica has been prefilled (the forecast's ``wait_s``),
at least one — after that the same request is judged against an empty queue.

A pure object (no clock, no I/O): the service and the simulator run the same gate. The
service learns the calibration when it reports first tokens (:meth:`SloGate.first_token`);
until then the roofline prior stands, uncalibrated.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.domain.requests import RequestClass
from placement.errors import InputError
from serving.admission.cost import GpuRates, gpu_rates
from serving.admission.forecast import Forecast, either_miss, forecast
from serving.admission.overload_signal import FLEET, PoolSignals
from serving.admission.prompt_rate import PromptRates
from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S, ShareCap
from serving.admission.tpot_calibration import TpotCalibration
from serving.admission.ttft_calibration import TtftCalibration
from serving.admission.vtc import VirtualTokenCounter
from serving.route.decode_steps import decode_step_table
from serving.route.plugins.base import queued_ahead_tokens, queued_prefill_tokens
from serving.route.ttft import prefill_table

if TYPE_CHECKING:
    from serving.route.types import Decision, ReplicaState, RoutePath, RouteQuery

DEFAULT_HEADROOM = 1.0
DEFAULT_CREDIT_CUT = 0.5
# a sheddable class is judged by its own SLO: refusing it earlier refuses requests that meet
DEFAULT_SHED_FACTOR = 1.0
DEFAULT_TPOT_HEADROOM = 1.0
PRESSURE_ALPHA = 0.02  # weight of one non-sheddable decision in the pressure average …
# … at most: in time, pressure follows the share of SLO refusals over the tightest TTFT SLO of
# the non-sheddable classes — a burst shorter than that is what the queue absorbs; an
# overload that lasts longer sets the pressure
DEFAULT_PRESSURE_WINDOW_S = 2.0  # when every class is sheddable
PRESSURE_FLOOR = 0.05  # below this, the odd refusal is noise, not overload
MIN_RETRY_AFTER_S = 1
# refuse a request at least this likely to miss its SLO: the share of refusals that would
# have met is then at most 1 − 0.9 (the precision the gate is held to)
DEFAULT_REFUSE_AT = 0.9
# past capacity, refuse what is more likely to miss than to meet: the capacity a refusal
# frees goes to a request more likely to meet
DEFAULT_OVERLOAD_REFUSE_AT = 0.5
# past capacity, a tenant whose counter leads the lowest active one by more than this yields
# (GPU-seconds per unit of credit weight)
DEFAULT_CREDIT_SLACK = math.inf
SECOND_LOOK_AT = 0.5  # more likely to miss than to meet: look for a better replica
# the strict threshold engages as the share of first-token-led refusals passes half the floor
# (an odd TTFT refusal is noise), and fully at the floor
STRICT_FROM = PRESSURE_FLOOR / 2
# the slot turns' wait the loop runs with beside the share cap (``placement bench loop``; tuned on
# the head of ``multi-model``: 0.5 / 1 / 2 s, bench/RESULTS.md)
DEFAULT_SLOT_TURN_S = 1.0
# with ``slot_turn_s``, a running adapter's tenant served at least this share of its entitlement
# yields its slot to a waiting tenant served less than SLOT_TURN_OWED of its own
SLOT_TURN_SERVED = 1.0
SLOT_TURN_OWED = 1.0
# with ``cold_move_ttft_share``, the second look moves a request off the replica holding its
# prefix to one where it loads cold only when that cold load is small (under this many tokens)
# or the replica there has the prefill to spare: its predicted TTFT, queue and cold prompt,
# within that share of the TTFT limit (0.75 measured best of 0.5 / 0.75 / 1 on kv-bound's head)
COLD_MOVE_MIN_TOKENS = 2048
# the calibration of a replica's LoRA adapter requests, and of those that wait for a slot, is
# kept under its id with these suffixes (:func:`calibration_key`)
ADAPTER_KEY = "#lora"
SLOT_WAIT_KEY = "#lora-slot"
SLOT_QUEUE_KEY = "#lora-queue"  # … forecast by their place in the queue for a slot
# … and of its requests sent with an engine priority past 0, under this suffix and the priority
# (:mod:`serving.admission.engine_priority`): a replica scheduling by priority lets better ones
# pass them, so their first tokens come later than the queue ahead of them says
PRIORITY_KEY = "#p"
# while the fleet keeps up, a request that waits for a LoRA slot is forecast to wait this long
# for each slot handover it waits for (the adapters ahead of it, and its own) — a prior scale
# its replica's calibration (:data:`SLOT_QUEUE_KEY`) corrects: ~0.25 s per adapter ahead on the
# swap replicas of ``multi-model``'s head at load 1 (bench/RESULTS.md)
SLOT_HANDOVER_S = 0.25
# … once that calibration has learned from slot waits worth this many first tokens forecast at
# 1 s (its decayed Σ forecast², s²): until then the release rate's forecast stands
SLOT_QUEUE_MIN_WEIGHT_S2 = 4.0

# what tenants' credits are charged in: GPU-seconds (:mod:`serving.admission.cost`), or the
# Virtual Token Counter's weighted tokens (what the gate charged before; an ablation)
GPU_SECONDS = "gpu_s"
TOKENS = "tokens"
CHARGES = (GPU_SECONDS, TOKENS)

# with ``tpot_shed_from``, the TPOT threshold falls from ``refuse_at`` to the gate's own as the
# share of SLO refusals goes from ``tpot_shed_from`` to this many times it
TPOT_SHED_SPAN = 3.0
# … and, until it sheds, a decode this long (iterations) is judged by the model alone, not
# blended with the replica's observed decodes of its length: a 400-token decode's share is
# known 15–20 s after the conditions it describes (``tiers`` at load 2: 140 TPOT refusals of
# long decodes by the blend, none of which would have missed)
BLEND_BELOW_GAPS = 16

# the rule behind a judgement (:attr:`Judgement.rule`)
ADMITTED = ""
TTFT = "ttft"  # likely to miss, mostly for its TTFT
TPOT = "tpot"  # likely to miss, mostly for its TPOT
CREDIT = "credit"  # doubtful, and its tenant is over credit under pressure
UNREACHABLE = "unreachable"  # misses its TTFT even alone on the replica: no retry helps


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """One admission decision: the rule that refused (:data:`ADMITTED` when admitted), the
    limits applied and the forecast on the replica judged (None when the caller gave only a
    predicted TTFT)."""

    rule: str
    ttft_limit_s: float
    tpot_limit_s: float
    miss_probability: float = 0.0  # of missing its SLO (either), as forecast
    threshold: float = 1.0  # the miss probability it would have been refused at
    forecast: Forecast | None = None
    replica_id: str = ""
    # admitted although it will miss its TTFT SLO wherever it goes, even alone on a replica
    # (its own prefill is too long): served late while the fleet keeps up
    best_effort: bool = False


class SloGate:
    def __init__(
        self,
        classes: Mapping[str, RequestClass],
        *,
        headroom: float = DEFAULT_HEADROOM,
        credit_cut: float = DEFAULT_CREDIT_CUT,
        shed_factor: float = DEFAULT_SHED_FACTOR,
        tpot_headroom: float = DEFAULT_TPOT_HEADROOM,
        refuse_at: float = DEFAULT_REFUSE_AT,
        overload_refuse_at: float = DEFAULT_OVERLOAD_REFUSE_AT,
        vtc: VirtualTokenCounter | None = None,
        charge: str = GPU_SECONDS,
        best_effort: bool = False,
        credit_slack: float | None = None,
        strict_refuse_at: float | None = None,
        strict_credit_cut: float = 0.0,
        cold_move_ttft_share: float | None = None,
        tpot_by_work: bool = False,
        tpot_computed: bool = False,
        tpot_shed_from: float | None = None,
        pressure_by_model: bool = False,
        credit_reserve: float = 0.0,
        share_cap: float | None = None,
        share_window_s: float = DEFAULT_SHARE_WINDOW_S,
        slot_turn_s: float | None = None,
        slot_wait_from_engine: bool = False,
    ) -> None:
        if charge not in CHARGES:
            raise InputError(f"{charge!r}", field="charge", expected=" or ".join(CHARGES))
        if not headroom > 0:
            raise InputError(f"{headroom}", field="headroom", expected="> 0")
        if not 0 <= credit_cut < 1:
            raise InputError(f"{credit_cut}", field="credit_cut", expected="in [0, 1)")
        if not tpot_headroom > 0:
            raise InputError(f"{tpot_headroom}", field="tpot_headroom", expected="> 0")
        if not 0 < shed_factor <= 1:
            raise InputError(f"{shed_factor}", field="shed_factor", expected="in (0, 1]")
        if not 0 < refuse_at <= 1:
            raise InputError(f"{refuse_at}", field="refuse_at", expected="in (0, 1]")
        if cold_move_ttft_share is not None and not cold_move_ttft_share > 0:
            raise InputError(
                f"{cold_move_ttft_share}", field="cold_move_ttft_share", expected="> 0"
            )
        if not 0 < overload_refuse_at <= refuse_at:
            raise InputError(
                f"{overload_refuse_at}",
                field="overload_refuse_at",
                expected=f"in (0, refuse_at = {refuse_at}]",
            )
        if strict_refuse_at is not None and not 0 < strict_refuse_at <= overload_refuse_at:
            raise InputError(
                f"{strict_refuse_at}",
                field="strict_refuse_at",
                expected=f"in (0, overload_refuse_at = {overload_refuse_at}]",
            )
        if tpot_shed_from is not None and not 0 < tpot_shed_from < 1:
            raise InputError(f"{tpot_shed_from}", field="tpot_shed_from", expected="in (0, 1)")
        if not 0 <= strict_credit_cut < 1:
            raise InputError(
                f"{strict_credit_cut}", field="strict_credit_cut", expected="in [0, 1)"
            )
        if not 0 <= credit_reserve < 1:
            raise InputError(f"{credit_reserve}", field="credit_reserve", expected="in [0, 1)")
        if slot_turn_s is not None and not slot_turn_s > 0:
            raise InputError(f"{slot_turn_s}", field="slot_turn_s", expected="> 0")
        if slot_turn_s is not None and share_cap is None:
            raise InputError(
                f"{slot_turn_s} without a share cap", field="slot_turn_s", expected="share_cap set"
            )
        self.slot_turn_s = slot_turn_s
        self.slot_wait_from_engine = slot_wait_from_engine
        self.classes = dict(classes)
        self.headroom = headroom
        self.credit_cut = credit_cut
        self.shed_factor = shed_factor
        self.refuse_at = refuse_at
        self.overload_refuse_at = overload_refuse_at
        self.strict_refuse_at = strict_refuse_at
        self.strict_credit_cut = strict_credit_cut
        self.cold_move_ttft_share = cold_move_ttft_share
        self.tpot_by_work = tpot_by_work
        self.tpot_computed = tpot_computed
        self.tpot_shed_from = tpot_shed_from
        self.credit_reserve = credit_reserve
        # past capacity, a tenant served past ``share_cap`` × its entitlement in its pool over
        # the last ``share_window_s`` yields (:mod:`serving.admission.share_cap`; None: no cap)
        self.share_cap = None if share_cap is None else ShareCap(share_cap, window_s=share_window_s)
        self._model = FLEET  # the model whose pool is judged now (:meth:`judging`)
        tight = [c.ttft_slo_s for c in self.classes.values() if not c.sheddable]
        self.pressure_window_s = min(tight, default=DEFAULT_PRESSURE_WINDOW_S)
        self.tpot_headroom = tpot_headroom
        self.vtc = vtc if vtc is not None else VirtualTokenCounter()
        self.calibration = TtftCalibration()
        self.tpot_calibration = TpotCalibration()
        self.prompt_rates = PromptRates()
        self.refused: Counter[tuple[str, str]] = Counter()  # (tenant, class) → refusals
        # credits are charged in GPU-seconds (:mod:`serving.admission.cost`): a request's on
        # the kind it was dispatched to (kept until it finishes), else these
        self.default_rates = gpu_rates("", "", 1)
        self.charge = charge
        self.best_effort = best_effort
        self.credit_slack = DEFAULT_CREDIT_SLACK if credit_slack is None else credit_slack
        self._rates: dict[int, GpuRates] = {}
        # the overload signals, per model pool: a request is judged by its model's (selected
        # by :meth:`forecast_on`, :meth:`admit_decision` and :meth:`judge` given a model)
        self.signals = PoolSignals(by_model=pressure_by_model)
        self._signal = self.signals.of(FLEET)
        self.last = Judgement(rule=ADMITTED, ttft_limit_s=math.inf, tpot_limit_s=math.inf)
        # the decision the last :meth:`admit_decision` judged: the second look's when it went
        # there — where the request would have been sent had it been admitted
        self.last_decision: Decision | None = None
        self.retry_after_s = MIN_RETRY_AFTER_S

    @property
    def pressure(self) -> float:
        """The share of SLO refusals, averaged, of the pool judged now (the model of the
        request last forecast or judged)."""
        return self._signal.pressure

    @pressure.setter
    def pressure(self, value: float) -> None:
        self._signal.pressure = value

    @property
    def ttft_pressure(self) -> float:
        """The share of refusals led by the first token (the strict regime's signal) of the
        pool judged now."""
        return self._signal.ttft_pressure

    @ttft_pressure.setter
    def ttft_pressure(self, value: float) -> None:
        self._signal.ttft_pressure = value

    def judging(self, model: str) -> None:
        """Judge by ``model``'s pool from now on (its overload signals); with one signal for
        the fleet there is nothing to select (the share cap's pool is still ``model``'s)."""
        self._model = model
        if self.signals.by_model:
            self._signal = self.signals.of(model)

    def _class(self, request_class: str) -> RequestClass:
        cls = self.classes.get(request_class)
        if cls is None:
            raise InputError(
                f"unknown request class '{request_class}'",
                field="request_class",
                expected="one of " + ", ".join(sorted(self.classes)),
            )
        return cls

    def limit_s(self, request_class: str, budget_s: float | None = None) -> float:
        """The TTFT above which a request of this class misses its SLO (× ``headroom``); with
        ``budget_s``, the time its first token still has (after waiting in a queue) instead."""
        cls = self._class(request_class)
        limit = (cls.ttft_slo_s if budget_s is None else max(0.0, budget_s)) * self.headroom
        return limit * self.shed_factor if cls.sheddable else limit

    def refuse_threshold(self, tenant: str | None = None) -> float:
        """The chance of missing at which a request (of ``tenant``) is refused now.

        ``refuse_at`` while the fleet keeps up. Once the share of SLO refusals has stayed past
        :data:`PRESSURE_FLOOR` the fleet is past its capacity, and the capacity a refusal
        frees serves the next request: the threshold falls, over a second such share, to
        ``overload_refuse_at``.
        Tenants owed credit keep part of the way back (``credit_cut`` × how far down the
        active tenants' counters they stand), so the doubtful requests refused under overload
        are those of the tenants furthest over their share.
        With ``strict_refuse_at`` set, ``overload_refuse_at`` itself falls toward it (and
        ``credit_cut`` toward ``strict_credit_cut``) by :meth:`strictness`.
        """
        base, cut = self._base_and_cut()
        if tenant is None:
            return base
        return self._owed_threshold(base, cut, 1.0 - self.vtc.over_credit(tenant))

    def _base_and_cut(self) -> tuple[float, float]:
        """The threshold now before any tenant's lift, and the lift's ``credit_cut`` now (the
        strict regime moves both, by one :meth:`strictness`)."""
        past = min(max((self.pressure - PRESSURE_FLOOR) / PRESSURE_FLOOR, 0.0), 1.0)
        overload = self.overload_refuse_at
        cut = self.credit_cut
        if self.strict_refuse_at is not None:
            strict = self.strictness()
            overload -= strict * (overload - self.strict_refuse_at)
            cut -= strict * (cut - self.strict_credit_cut)
        return self.refuse_at - past * (self.refuse_at - overload), cut

    def strictness(self) -> float:
        """How far the strict regime holds (0: not at all, 1: fully): the share of refusals
        led by the first token past :data:`STRICT_FROM`, fully at :data:`PRESSURE_FLOOR`; 0
        without ``strict_refuse_at``."""
        if self.strict_refuse_at is None:
            return 0.0
        span = PRESSURE_FLOOR - STRICT_FROM
        return min(max((self.ttft_pressure - STRICT_FROM) / span, 0.0), 1.0)

    def _tpot_chance(self, seen: Forecast, tpot_limit_s: float) -> float:
        """The chance of a TPOT miss a judgement counts: the model's while the fleet keeps up,
        blended with the replica's observed decodes past the pressure floor — with
        ``tpot_shed_from``, for a long decode (:data:`BLEND_BELOW_GAPS` iterations or more)
        only as far as the TPOT rule sheds (:meth:`tpot_shedding`): the blend of long
        decodes lags the conditions it describes."""
        past = self.pressure >= PRESSURE_FLOOR
        chance = seen.tpot_miss(tpot_limit_s, observed=past)
        if self.tpot_shed_from is None or not past or seen.gaps < BLEND_BELOW_GAPS:
            return chance
        shedding = self.tpot_shedding()
        return shedding * chance + (1.0 - shedding) * seen.tpot_miss(tpot_limit_s)

    def tpot_shedding(self) -> float:
        """How far the TPOT rule sheds (0: it refuses only at ``refuse_at``, 1: at the gate's
        threshold, as the TTFT chance): 1 without ``tpot_shed_from``; with it, the share of SLO
        refusals from ``tpot_shed_from`` to :data:`TPOT_SHED_SPAN` times it."""
        start = self.tpot_shed_from
        if start is None:
            return 1.0
        span = start * (TPOT_SHED_SPAN - 1.0)
        return min(max((self.pressure - start) / span, 0.0), 1.0)

    def reserve(self, tenant: str) -> float:
        """The share of the TTFT limit kept from ``tenant`` for the tenants owed credit: 0
        while the fleet keeps up (pressure under :data:`PRESSURE_FLOOR`) or without
        ``credit_reserve``; past capacity ``credit_reserve`` × the tenant's standing among the
        active tenants (0 the most owed, 1 the furthest over its share)."""
        if self.credit_reserve <= 0.0 or self.pressure < PRESSURE_FLOOR:
            return 0.0
        return self.credit_reserve * self.vtc.over_credit(tenant)

    def _owed_threshold(self, base: float, cut: float, owed: float) -> float:
        """The threshold of a tenant ``owed`` (0 furthest over its share, 1 most owed) when
        the base threshold is ``base`` and the lift's cut ``cut``."""
        return base + cut * owed * (self.refuse_at - base)

    def _pressure_weight(self, now: float | None) -> float:
        if now is None:
            return PRESSURE_ALPHA
        signal = self._signal
        last, signal.at = signal.at, now
        if last is None or now <= last:
            return 0.0 if last is not None else PRESSURE_ALPHA
        return min(PRESSURE_ALPHA, 1.0 - math.exp(-(now - last) / self.pressure_window_s))

    def tpot_limit_s(self, request_class: str) -> float:
        """The TPOT above which a request of this class misses its SLO (× ``tpot_headroom``)."""
        return self._class(request_class).tpot_slo_s * self.tpot_headroom

    def admit(
        self,
        tenant: str,
        request_class: str,
        predicted_ttft_s: float,
        predicted_tpot_s: float = 0.0,
    ) -> bool:
        """Admit (and charge the tenant's prompt later with :meth:`started`) or refuse a
        request whose TTFT (and TPOT) are known exactly: refused when either is over its
        limit. :meth:`admit_decision` judges the route path's decisions by their forecasts."""
        return self.judge(
            tenant,
            request_class,
            Forecast(
                ttft_s=predicted_ttft_s,
                ttft_spread=0.0,
                step_s=predicted_tpot_s,
                full_step_s=predicted_tpot_s,
                gaps=1,
            ),
        )

    def judge(
        self,
        tenant: str,
        request_class: str,
        seen: Forecast,
        now: float | None = None,
        budget_s: float | None = None,
        *,
        retry: bool = False,
        replica_id: str = "",
        refuse_at: float | None = None,
        model: str | None = None,
        cost: float | None = None,
        slot_turn: bool = False,
    ) -> bool:
        """Admit or refuse a request forecast as ``seen`` at ``now`` (None: the pressure
        moves per decision only) with ``budget_s`` left for its first token (None: its class's
        SLO) on ``replica_id``, by ``model``'s pool (None: the pool judged now, that of the
        last forecast); :attr:`last` keeps the rule. A ``retry`` (a request judged
        before, waiting in a flow-control queue and tried again many times a second) refused
        is not counted again in :attr:`refused`; it still moves the pressure, so the overload
        signal lasts as long as requests wait. (Counting only first tries in the pressure was
        measured in ``bench flow``: more goodput behind the gate, 0.92 → 1.04 of the best
        refusing service, but the top band fell from 0.956 to 0.868 on the held-out tail.)
        ``cost``: the request's GPU-seconds where it is judged, counted in its pool's offered
        cost for the share cap (None: not counted). ``slot_turn``: its adapter's slot is owed
        to a waiting tenant (:meth:`owes_slot`): refused for credit if it would be admitted."""
        if model is not None:
            self.judging(model)
        ttft_limit = self.limit_s(request_class, budget_s)
        tpot_limit = self.tpot_limit_s(request_class)
        # past capacity, a tenant over its share queues only where its first token still
        # leaves the reserve's room to the tenants owed (see ``credit_reserve``)
        own_limit = ttft_limit * (1.0 - self.reserve(tenant))
        ttft_miss = seen.ttft_miss(own_limit)
        tpot_miss = self._tpot_chance(seen, tpot_limit)
        miss = either_miss(ttft_miss, tpot_miss)
        base, cut = self._base_and_cut()
        if refuse_at is not None:
            base = min(base, refuse_at)
        threshold = self._owed_threshold(base, cut, 1.0 - self.vtc.over_credit(tenant))
        owed_at = self._owed_threshold(base, cut, 1.0)  # the most owed tenant's
        if self.tpot_shed_from is not None:
            # while the fleet keeps up, a TPOT chance under ``refuse_at`` is not a refusal
            held = threshold + (1.0 - self.tpot_shedding()) * max(self.refuse_at - threshold, 0.0)
            if tpot_miss < held:
                tpot_miss, miss = 0.0, ttft_miss
        rule = ADMITTED
        best_effort = False
        if miss >= threshold:
            rule = TTFT if ttft_miss >= tpot_miss else TPOT
            if miss < owed_at:
                rule = CREDIT  # a tenant owed credit would have been admitted
            elif own_limit < ttft_limit and (
                either_miss(seen.ttft_miss(ttft_limit), tpot_miss) < threshold
            ):
                # it would meet, but in the room kept for the tenants owed: refused for credit
                rule = CREDIT
            if rule == TTFT and seen.alone_miss(ttft_limit) >= self.refuse_at:
                # its own prefill misses even with nothing ahead: no retry would ever meet
                rule = UNREACHABLE
                if self.best_effort and self.pressure < PRESSURE_FLOOR:
                    # while the fleet keeps up, it is served late
                    rule, best_effort = ADMITTED, True
        elif self.pressure >= PRESSURE_FLOOR and self.vtc.lead(tenant) > self.credit_slack:
            # past capacity, a tenant served past its share by more than the slack yields
            # what it asks for to the tenants owed (see ``credit_slack``)
            rule = CREDIT
        cap_wait = 0.0
        shares = self.share_cap
        if shares is not None and now is not None:
            if rule == ADMITTED and self.pressure >= PRESSURE_FLOOR:
                # past capacity, a tenant served past the cap × its entitlement in its pool
                # lately yields to the tenants of that pool owed theirs (see ``share_cap``)
                cap_wait = shares.yields_for(self._model, tenant, self.vtc.credit_weight, now)
                if cap_wait > 0.0:
                    rule = CREDIT
            if rule == ADMITTED and slot_turn and self.slot_turn_s is not None:
                # its adapter's slot goes to a tenant waiting for one (see "Slot turns")
                rule, cap_wait = CREDIT, self.slot_turn_s
            if cost is not None and not retry and rule != UNREACHABLE:
                # what it asked for counts in its pool's offered cost (not what no queue could
                # serve)
                shares.offer(self._model, tenant, cost, now)
        if not self.classes[request_class].sheddable:
            # only SLO refusals measure overload (refusals for credit would feed themselves);
            # past capacity their share is set by how far past (1 − 1/ρ at ρ× capacity), not
            # by the threshold: a lower threshold empties the queues and refuses fewer later
            slo_refusal = 1.0 if rule in (TTFT, TPOT, UNREACHABLE) else 0.0
            if (
                slo_refusal
                and self.slot_wait_from_engine
                and _slot_led(seen, own_limit, tpot_miss, threshold)
            ):
                slo_refusal = 0.0  # refused for a LoRA slot, not for the fleet's queue
            weight = self._pressure_weight(now)
            self.pressure += weight * (slo_refusal - self.pressure)
            # the strict regime's signal: a queue that overflows, not decodes that miss
            led_by_ttft = 1.0 if rule in (TTFT, UNREACHABLE) and slo_refusal else 0.0
            self.ttft_pressure += weight * (led_by_ttft - self.ttft_pressure)
        self.last = Judgement(
            rule=rule,
            ttft_limit_s=ttft_limit,
            tpot_limit_s=tpot_limit,
            miss_probability=miss,
            threshold=threshold,
            forecast=seen,
            replica_id=replica_id,
            best_effort=best_effort,
        )
        if rule != ADMITTED:
            if not retry:
                self.refused[(tenant, request_class)] += 1
            wait = seen.wait_s if seen.wait_s is not None else seen.ttft_s
            if rule == UNREACHABLE:
                wait = 0.0  # no wait helps
            elif cap_wait > 0.0:
                wait = cap_wait  # until its recent service decays back under the cap
            self.retry_after_s = max(MIN_RETRY_AFTER_S, math.ceil(wait))
        return rule == ADMITTED

    def forecast(
        self, path: RoutePath, query: RouteQuery, decision: Decision, now: float
    ) -> Forecast:
        """What ``query`` would see on ``decision``'s replica if admitted now: the route path's
        TTFT prediction, its queue taken without the requests waiting for a LoRA adapter slot
        (the replica lets the request pass them) and, on a replica scheduling by priority,
        without those of a worse priority than the query's (it passes them too), and the wait
        for a slot of its own."""
        state = path.replica(decision.replica_id)
        predicted = decision.predicted_ttft_s
        if state is not None and (state.slot_waiting_requests or state.prefill_tokens_by_priority):
            predicted = prefill_table(state.accelerator, state.model, state.tp).ttft(
                query.input_tokens - decision.cached_tokens,
                queued_ahead_tokens(state, query.priority),
            )
        return self.forecast_on(
            state,
            decision.replica_id,
            predicted,
            query,
            now,
            cached_tokens=decision.cached_tokens,
            slot_wait_s=decision.slot_wait_s,
            slot_handovers=decision.slot_handovers,
        )

    def forecast_on(
        self,
        state: ReplicaState | None,
        replica_id: str,
        predicted_ttft_s: float,
        query: RouteQuery,
        now: float,
        *,
        cached_tokens: int = 0,
        slot_wait_s: float = 0.0,
        slot_handovers: int = 0,
    ) -> Forecast:
        """What ``query`` would see on the replica ``replica_id`` (live state ``state``, None
        when unknown) whose route-path TTFT prediction is ``predicted_ttft_s``, with
        ``cached_tokens`` of its prompt already cached there, after waiting for a LoRA adapter
        slot: ``slot_wait_s`` at the replica's recent release rate, or, until the fleet is fully
        past its capacity, by its ``slot_handovers`` (0: it need not wait; see "LoRA slots"
        above; each forecast calibrated apart: :func:`calibration_key`). The gate judges by
        ``query``'s model's pool from then on (:meth:`judging`)."""
        self.judging(query.model)
        rates = self.prompt_rates
        by_work = self.tpot_by_work
        # in tokens to compute: by work, or (``tpot_computed``) at the kind's own prefill rate
        computed = by_work or self.tpot_computed
        queue_wait = slot_handovers * SLOT_HANDOVER_S
        # before the replica's slots have turned over (no release rate yet) the wait is unknown;
        # by the queue once its calibration has learned from slot waits
        by_queue = (
            slot_wait_s > 0.0 < queue_wait
            and self.pressure < 2.0 * PRESSURE_FLOOR
            and self.calibration.weight(replica_id + SLOT_QUEUE_KEY) >= SLOT_QUEUE_MIN_WEIGHT_S2
        )
        wait = queue_wait if by_queue else slot_wait_s
        key = calibration_key(replica_id, query.adapter, wait, by_queue=by_queue)
        if query.priority:
            key += f"{PRIORITY_KEY}{query.priority}"
        own = None
        if state is not None:
            own = prefill_table(state.accelerator, state.model, state.tp).prefill(
                query.input_tokens - cached_tokens
            )
        return forecast(
            predicted_ttft_s=predicted_ttft_s,
            state=state,
            table=None
            if state is None
            else decode_step_table(state.accelerator, state.model, state.tp),
            ratio=self.calibration.ratio(key),
            spread=self.calibration.spread(key),
            prompt_rate=(rates.computed_rate if computed else rates.rate)(replica_id, now),
            request_rate=rates.request_rate(replica_id, now),
            input_tokens=query.input_tokens,
            output_tokens=query.max_output_tokens,
            own_prefill_s=own,
            observed=self.tpot_calibration.shares(replica_id, query.max_output_tokens - 1),
            slot_wait_s=wait,
            slot_rate_wait_s=slot_wait_s,
            slot_queue_wait_s=queue_wait,
            by_work=computed,
            computed_share=rates.computed_share(replica_id) if computed else 1.0,
            seconds_per_token=rates.seconds_per_token(replica_id) if by_work else None,
            tpot_ratio=self.tpot_calibration.ratio(replica_id) if by_work else 1.0,
        )

    def _decodes_in_time(
        self, state: ReplicaState, query: RouteQuery, now: float, tpot_limit: float
    ) -> bool:
        """Whether ``query`` is more likely than not to meet its TPOT on ``state``'s replica
        (its TTFT there taken without any cached prefix: a filter for the second look)."""
        table = prefill_table(state.accelerator, state.model, state.tp)
        predicted = table.ttft(query.input_tokens, queued_prefill_tokens(state))
        seen = self.forecast_on(state, state.id, predicted, query, now)
        likely = seen.tpot_miss(tpot_limit, observed=True)
        return likely < SECOND_LOOK_AT and state.tpot_s <= tpot_limit

    def admit_decision(
        self,
        path: RoutePath,
        query: RouteQuery,
        decision: Decision,
        now: float,
        *,
        retry: bool = False,
    ) -> Decision | None:
        """Admit ``decision`` — or, when it is more likely to miss than to meet or its
        replica's recent requests decoded slower than the TPOT SLO, the route path's fastest
        replica among those where it is likely to decode in time, if it is less likely to miss
        there (or, leaving a replica decoding late, likely to meet) — record its dispatch and
        charge the prompt; None when refused (:attr:`last` says why). ``retry``: see
        :meth:`judge`."""
        tenant, cls = query.tenant, query.request_class
        self.judging(query.model)
        ttft_limit = self.limit_s(cls, query.ttft_budget_s)
        tpot_limit = self.tpot_limit_s(cls)
        seen = self.forecast(path, query, decision, now)
        # where to send it: the replicas' observed decodes count (not in the judgement below)
        miss = seen.miss(ttft_limit, tpot_limit, observed=True)
        late = seen.observed_tpot_s > tpot_limit
        held_at: float | None = None
        # a request for a LoRA adapter stays where the route path sent it: the plan keeps its
        # adapter there (pinned, or swapped over a few replicas), and the fastest replica
        # elsewhere would load it into a slot another adapter holds
        if (miss >= SECOND_LOOK_AT or late) and not query.adapter:

            def in_time(state: ReplicaState) -> bool:
                return self._decodes_in_time(state, query, now, tpot_limit)

            other_choice = path.fastest(query, now, accept=in_time)
            if other_choice is not None and other_choice.replica_id != decision.replica_id:
                share = self.cold_move_ttft_share
                if share is not None and cold_move_crowds(
                    decision, other_choice, ttft_limit * share
                ):
                    # not a way out: refused where it is when more likely to miss than meet
                    held_at = SECOND_LOOK_AT
                else:
                    other = self.forecast(path, query, other_choice, now)
                    other_miss = other.miss(ttft_limit, tpot_limit, observed=True)
                    if other_miss < miss or (late and other_miss < SECOND_LOOK_AT):
                        decision, seen = other_choice, other
        self.last_decision = decision
        cost = None
        if self.share_cap is not None:
            # priced as its tenant would be charged on that replica (:meth:`dispatched`)
            rates = self.rates_of(path.replica(decision.replica_id))
            cost = rates.request(
                query.input_tokens, decision.cached_tokens, query.max_output_tokens
            )
        admitted = self.judge(
            tenant,
            cls,
            seen,
            now,
            query.ttft_budget_s,
            retry=retry,
            replica_id=decision.replica_id,
            refuse_at=held_at,  # judged by query.model's pool: selected above
            cost=cost,
            slot_turn=self.owes_slot(path, query, decision, now),
        )
        if not admitted:
            return None
        self.dispatched(
            decision.replica_id,
            query,
            now,
            seen,
            state=path.replica(decision.replica_id),
            cached_tokens=decision.cached_tokens,
        )
        return decision

    def owes_slot(self, path: RoutePath, query: RouteQuery, decision: Decision, now: float) -> bool:
        """Whether ``query``'s adapter, running on ``decision``'s replica, owes its slot to
        an adapter of another tenant that has waited there at least ``slot_turn_s``: its
        tenant stands at or past its entitlement in its pool's share cap while one of those
        waiting stands below its own (see "Slot turns"; never without the setting)."""
        turn, shares = self.slot_turn_s, self.share_cap
        if turn is None or shares is None or not query.adapter or decision.slot_handovers:
            return False
        state = path.replica(decision.replica_id)
        if state is None or state.slot_starved_since > now - turn:
            return False
        weight = self.vtc.credit_weight
        tenant = query.tenant
        if shares.ratio(query.model, tenant, weight, now) < SLOT_TURN_SERVED:
            return False
        return any(
            shares.ratio(query.model, waiting, weight, now) < SLOT_TURN_OWED
            for waiting in state.slot_starved_tenants
            if waiting != tenant
        )

    def dispatched(
        self,
        replica_id: str,
        query: RouteQuery,
        now: float,
        seen: Forecast,
        *,
        state: ReplicaState | None = None,
        cached_tokens: int = 0,
    ) -> None:
        """``query`` goes to ``replica_id`` (admitted here, or sent by a caller that overrides
        the gate) as forecast ``seen``: its prompt counts in the replica's prompt rate, its
        forecast awaits its first token (:meth:`first_token`), the tenant is charged its
        prompt's GPU-seconds on the replica's kind (``state``; None: :attr:`default_rates`),
        the ``cached_tokens`` the route path expects there discounted."""
        work = 0.0
        if self.tpot_by_work and state is not None:
            table = decode_step_table(state.accelerator, state.model, state.tp)
            work = table.prompt_work_s(query.input_tokens, cached_tokens)
        self.prompt_rates.add(replica_id, query.input_tokens, now, cached_tokens, work)
        # a request that waits for a LoRA slot teaches both forecasts of that wait
        base = seen.prior_ttft_s - seen.slot_wait_s
        queue = seen.slot_queue_wait_s
        key = calibration_key(replica_id, query.adapter, seen.slot_rate_wait_s)
        if query.priority:
            key += f"{PRIORITY_KEY}{query.priority}"
        self.calibration.dispatched(
            id(query),
            key,
            base + seen.slot_rate_wait_s,
            now,
            also=(replica_id + SLOT_QUEUE_KEY, base + queue) if queue > 0.0 else None,
        )
        if seen.gaps > 0:
            # the expected TPOT teaches the replica's TPOT ratio, used only by work
            expected = seen.tpot_s if self.tpot_by_work else 0.0
            self.tpot_calibration.dispatched(
                id(query), replica_id, seen.step_s, seen.full_step_s, expected
            )
        rates = self.rates_of(state)
        self._rates[id(query)] = rates
        if self.share_cap is not None:
            asked = rates.request(query.input_tokens, cached_tokens, query.max_output_tokens)
            self.share_cap.serve(query.model, query.tenant, asked, now)
        self.started(query.tenant, query.input_tokens, cached_tokens, rates)
        if self.charge == GPU_SECONDS:
            # its decode as asked for, now: a long answer would otherwise be charged only
            # when it ends, and its tenant look owed for the minutes it decodes
            self.vtc.add(query.tenant, rates.decode(query.input_tokens, query.max_output_tokens))

    def rates_of(self, state: ReplicaState | None) -> GpuRates:
        """GPU-second prices on a replica's kind (None: :attr:`default_rates`)."""
        if state is None:
            return self.default_rates
        return gpu_rates(state.accelerator, state.model, state.tp)

    def first_token(self, query: RouteQuery, now: float) -> None:
        """The first token of a dispatched query arrived: calibrate its replica's TTFT."""
        self.calibration.first_token(id(query), now)
        self.tpot_calibration.first_token(id(query), now)

    def started(
        self,
        tenant: str,
        input_tokens: int,
        cached_tokens: int = 0,
        rates: GpuRates | None = None,
    ) -> None:
        """Charge ``tenant`` a prompt's GPU-seconds (on ``rates``' kind, else the default;
        its weighted tokens when the gate charges :data:`TOKENS`)."""
        if self.charge == TOKENS:
            self.vtc.start(tenant, input_tokens)
            return
        use = rates if rates is not None else self.default_rates
        self.vtc.start_cost(tenant, use.prefill(input_tokens, cached_tokens))

    def finished(
        self,
        tenant: str,
        output_tokens: int,
        query: RouteQuery | None = None,
        now: float | None = None,
    ) -> None:
        """A request of ``tenant`` completed after ``output_tokens`` at ``now``: its TPOT
        calibrates its replica's (when ``now`` is given), and its decode's GPU-seconds on the
        kind it was dispatched to (``query`` as dispatched), charged at dispatch for the tokens
        it asked for, are settled for those it generated (unknown query: the default rates,
        without its prompt's context)."""
        if query is not None and now is not None:
            self.tpot_calibration.finished(id(query), output_tokens, now)
        rates = self._rates.pop(id(query), None) if query is not None else None
        if self.charge == TOKENS:
            self.vtc.finish(tenant, output_tokens)
            return
        if rates is None or query is None:
            self.vtc.finish_cost(tenant, self.default_rates.decode(0, output_tokens))
            return
        asked = rates.decode(query.input_tokens, query.max_output_tokens)
        self.vtc.finish_cost(tenant, rates.decode(query.input_tokens, output_tokens) - asked)

    def set_credits(self, shares: Mapping[str, float]) -> None:
        """Tenants' credit shares (a plan's guaranteed shares) weigh their counters."""
        self.vtc.set_credit_weights(shares)


def _slot_led(seen: Forecast, ttft_limit_s: float, tpot_miss: float, threshold: float) -> bool:
    """Whether a refusal of ``seen`` is the LoRA slot wait's alone: without the wait (its
    calibrated share of the TTFT taken out) the chance of a miss falls under ``threshold``."""
    if seen.slot_wait_s <= 0.0 or seen.prior_ttft_s <= 0.0:
        return False
    share = max(seen.prior_ttft_s - seen.slot_wait_s, 0.0) / seen.prior_ttft_s
    unslotted = dataclasses.replace(seen, ttft_s=seen.ttft_s * share)
    return either_miss(unslotted.ttft_miss(ttft_limit_s), tpot_miss) < threshold


def calibration_key(
    replica_id: str, adapter: str = "", slot_wait_s: float = 0.0, *, by_queue: bool = False
) -> str:
    """The key a forecast is calibrated under: its replica's for the base model's requests; for
    a LoRA adapter's, the replica's adapter requests' (:data:`ADAPTER_KEY`: a load stalls the
    engine, and a request sent when a slot was free may still find the slots taken when it
    reaches the head of the queue), or, for one that waits for a slot when it is sent, the
    replica's slot-waiting requests' (:data:`SLOT_WAIT_KEY`: its first token is set by when a
    slot frees, which the replica's prefill speed says nothing about). One ratio for all would
    bend the base model's forecasts by the adapters' waits (on ``multi-model`` at load 1.5, base
    requests on the swap replicas forecast at 9.4 s came in 1.0 s), and the other way round."""
    if not adapter:
        return replica_id
    if by_queue:
        return replica_id + SLOT_QUEUE_KEY
    return replica_id + (SLOT_WAIT_KEY if slot_wait_s > 0.0 else ADAPTER_KEY)


def cold_move_crowds(held: Decision, other: Decision, spare_s: float) -> bool:
    """Whether moving a request from the route path's choice ``held`` to ``other`` (the
    second look's) would load at least :data:`COLD_MOVE_MIN_TOKENS` of the prefix cached at
    ``held`` cold on a replica without the prefill to spare for it (its predicted TTFT there,
    queue and cold prompt, past ``spare_s``).

    Such a move looks good for the request alone, but the fleet pays for it: the cold prefill
    takes the replica's prefill from the requests queued there, and the prefix it loads evicts
    another group's, whose next request then loads cold in turn. Past the knee of ``kv-bound``
    (hot prefixes whose KV is many replicas' caches) these moves made the prefix hit rate fall
    and the fleet thrash (bench/RESULTS.md)."""
    lost = held.cached_tokens - other.cached_tokens
    return lost >= COLD_MOVE_MIN_TOKENS and other.predicted_ttft_s > spare_s
