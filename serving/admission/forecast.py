"""What a request would see on a replica if it were admitted there now, and how likely it is
to miss its SLO.

**TTFT**: the route path's prediction (own prefill of the uncached prompt, the cached prefix
on that replica already discounted, plus the prompt tokens queued ahead over the kind's
prefill rate) stretched by **chunked-prefill interleaving** — each iteration carries the
``n`` decoding sequences' tokens, so prompt work advances ``C − n`` tokens per iteration of a
decode step plus a chunk instead of ``C`` per bare chunk (:mod:`serving.route.decode_steps`) — and
times the replica's calibration ratio (:mod:`serving.admission.ttft_calibration`: its observed
prefill speed and the cached share of its queue, learned from its first tokens). Its log
error has the replica's learned spread ``σ``, so the chance of missing a limit ``L`` is
``Φ(ln(ttft / L) / σ)``.

**TPOT**: prefill is first come, first served, so prompt work that reaches the replica after
the request — while it waits, and while it decodes — is prefilled in the very iterations it
decodes in, up to the budget ``C − n`` tokens per iteration. Its TPOT is the decode step
(``n`` sequences over their context) plus, per iteration, the prompt tokens sharing it at the
calibrated marginal cost ``c`` of a prompt token. It lies between two bounds: the decode-only
step and the *full-chunk* step (``C − n`` prompt tokens to compute in every iteration: a chunk
holds no cached prefix, so it takes the kind's own prefill time per token, and carries
``(C − n) / ratio`` of the prompt tokens as received, the calibration ratio discounting their
cached share). On a fast
accelerator the full-chunk step is under an interactive TPOT SLO (an H100 runs Llama-3-8B's
2,048-token chunk in ~45 ms) and the request cannot miss it; on a slower one (A100, L40S:
~120–130 ms) it misses when prompt chunks fill more than a share ``f* = (L − step) / (full −
step)`` of its ``o − 1`` decode iterations, i.e. when at least ``f* · (o − 1) · (C − n)``
prompt tokens are prefilled while it decodes. Those are the tokens queued behind it when its
first token comes — the arrivals during its wait, ``λ·T`` at the replica's recent prompt rate
``λ`` (:mod:`serving.admission.prompt_rate`), or, when more, the prompt tokens queued ahead of
it now (a replica that stays as loaded as it is has as much queued behind it by then) — plus
the arrivals during its decode: prefill is first come, first served, so an arrival at any time
while it decodes is prefilled in its iterations. (Counting half of them — an arrival half-way
shares only the second half, but all of its tokens — forecast a 3–5% chance of a TPOT miss for
the interactive requests admitted to the A100s on the head of ``synthetic`` over the
heterogeneous fleet at load 3, of which 87% missed.)
That work comes in requests of mean size ``s``: a compound Poisson sum, whose variance for
exponentially distributed sizes is ``2·mean·s``; the chance of a miss is its normal tail. A
short decode spans few arrivals, so its TPOT is close to a coin toss; a long one averages.

Prompt work arrives in bursts, not as a Poisson stream, and a short decode's miss is mostly
decided by a burst that comes after it is admitted. Where the gate chooses between replicas,
the chance the model gives is blended with the share of the replica's recent decodes of the
same length that missed by as much (``observed``, :mod:`serving.admission.tpot_calibration`):
that share says well which replica is safer, but not which request will miss, so a refusal is
judged by the model alone while the fleet keeps up, and by the blend past its capacity
(:mod:`serving.admission.slo_gate`, "Overload").

**By work** (``by_work``; the gate's ``tpot_by_work``, off by default). The default TPOT side
counts prompt work in tokens *received* and discounts their cached share by the TTFT
calibration ratio, which learns waits, not the cache (on ``kv-bound`` it stood at 0.92–1.06
where 61% of the prompt tokens were cached, and the forecast put a full chunk in every iteration
of decodes that ran at a third of that step). By work, prompt work is the tokens each replica
must *compute* (the prefix the route path expects cached there left out,
:mod:`serving.admission.prompt_rate`), each at what a computed token cost a chunk there lately —
its attention over the cached context it joins included — and the steps are corrected by the
replica's TPOT ratio (its long decodes' observed over forecast TPOT,
:mod:`serving.admission.tpot_calibration`). It raised the TPOT refusals' precision on
the head of ``kv-bound`` (load 1.5: 0.16 → 0.81) but not on its tail, and lost goodput past
capacity there and on ``tiers`` and ``synthetic`` (bench/RESULTS.md), so it is a setting, off.

A request with one output token has no TPOT.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from statistics import NormalDist

from serving.admission.tpot_calibration import PRIOR_WEIGHT, ChunkShares
from serving.route.decode_steps import DecodeStepTable
from serving.route.plugins.base import queued_ahead_tokens
from serving.route.types import ReplicaState

_NORMAL = NormalDist()


@dataclass(frozen=True, slots=True, kw_only=True)
class Forecast:
    """``ttft_s`` calibrated TTFT and ``ttft_spread`` its log error's σ; ``tpot_s`` expected
    TPOT; ``step_s`` / ``full_step_s`` the decode-only and full-chunk steps (calibrated);
    ``gaps`` its decode iterations (output tokens − 1); ``budget_tokens`` prompt tokens per
    iteration beside the decoders; ``prompt_rate`` / ``request_rate`` the replica's recent
    arrivals (tokens/s, requests/s)."""

    ttft_s: float
    ttft_spread: float
    prior_ttft_s: float = 0.0  # the stretched prediction before calibration (what it learns on)
    tpot_s: float = 0.0
    step_s: float = 0.0
    full_step_s: float = 0.0
    gaps: int = 0
    budget_tokens: float = 0.0
    prompt_rate: float = 0.0
    request_rate: float = 0.0
    observed_tpot_s: float = 0.0  # the replica's recent TPOT (router's moving average)
    queued_tokens: float = 0.0  # prompt tokens queued ahead of it (the router's count)
    # the TTFT's parts: its own prefill (uncached prompt alone on the replica, the prior's) and
    # the wait for what is queued ahead (None: not split, the caller gave only a TTFT)
    own_s: float | None = None
    wait_s: float | None = None
    # the chunk shares the replica's recent decodes of this length saw (None: none yet)
    observed: ChunkShares | None = None
    # by work: the replica's observed TPOT over the forecast's on its long decodes (1: none)
    tpot_ratio: float = 1.0
    # the wait for a LoRA adapter slot in ``ttft_s`` (before calibration; 0: none): one of the
    # two forecasts of it, at the replica's recent release rate and by its place in the queue
    # for a slot (:mod:`serving.admission.slo_gate`, "LoRA slots"), each calibrated apart
    slot_wait_s: float = 0.0
    slot_rate_wait_s: float = 0.0
    slot_queue_wait_s: float = 0.0

    def alone_miss(self, limit_s: float) -> float:
        """Chance that the TTFT exceeds ``limit_s`` even with nothing queued ahead (0 when
        the forecast is not split: nothing says it would)."""
        if self.own_s is None:
            return 0.0
        return dataclasses.replace(self, ttft_s=self.own_s).ttft_miss(limit_s)

    def ttft_miss(self, limit_s: float) -> float:
        """Chance that the TTFT exceeds ``limit_s``."""
        if self.ttft_s <= 0.0:
            return 0.0
        if limit_s <= 0.0:
            return 1.0
        if self.ttft_spread <= 0.0:
            return 1.0 if self.ttft_s > limit_s else 0.0
        return _NORMAL.cdf(math.log(self.ttft_s / limit_s) / self.ttft_spread)

    def tpot_miss(self, limit_s: float, *, observed: bool = False) -> float:
        """Chance that the TPOT exceeds ``limit_s`` (see the module docstring): the model's;
        with ``observed``, blended with the replica's recent decodes of this length."""
        ratio = self.tpot_ratio
        step, full = self.step_s * ratio, self.full_step_s * ratio  # the model's steps
        if self.gaps <= 0 or (self.full_step_s <= limit_s and full <= limit_s):
            return 0.0
        if self.step_s >= limit_s and step >= limit_s:
            return 1.0
        model = 0.0 if full <= limit_s else 1.0 if step >= limit_s else None
        if model is None:
            model = self._modelled_tpot_miss((limit_s - step) / (full - step), limit_s)
        seen = self.observed
        weight = seen.total if seen is not None and observed else 0.0
        if seen is None or weight <= 0.0:
            return model
        # the shares observed lie between the forecast's own steps (not the ratio's)
        if self.full_step_s <= limit_s:
            past = 0.0
        elif self.step_s >= limit_s:
            past = 1.0
        else:
            past = seen.past((limit_s - self.step_s) / (self.full_step_s - self.step_s))
        return (weight * past + PRIOR_WEIGHT * model) / (weight + PRIOR_WEIGHT)

    def _modelled_tpot_miss(self, share: float, limit_s: float) -> float:
        """The Poisson model's chance that prompt chunks fill more than ``share`` of its
        decode iterations."""
        needed = share * self.gaps * self.budget_tokens
        behind = max(self.prompt_rate * self.ttft_s, self.queued_tokens)
        mean = behind + self.prompt_rate * self.gaps * limit_s
        if mean <= 0.0:
            return 0.0
        size = self.prompt_rate / self.request_rate if self.request_rate > 0 else mean
        sd = math.sqrt(2.0 * mean * size)
        return 1.0 - _NORMAL.cdf((needed - mean) / sd)

    def miss(self, ttft_limit_s: float, tpot_limit_s: float, *, observed: bool = False) -> float:
        """Chance that it misses either SLO (the two taken as independent); ``observed`` as
        for :meth:`tpot_miss`."""
        tpot = self.tpot_miss(tpot_limit_s, observed=observed)
        return either_miss(self.ttft_miss(ttft_limit_s), tpot)


def either_miss(ttft_miss: float, tpot_miss: float) -> float:
    """Chance of missing either SLO, the two chances taken as independent."""
    return 1.0 - (1.0 - ttft_miss) * (1.0 - tpot_miss)


def interleave(table: DecodeStepTable, running: float, context_tokens: float) -> float:
    """How much slower prompt work advances with ``running`` sequences decoding over
    ``context_tokens`` than through bare chunks: seconds per prompt token of a mixed iteration
    over those of a chunk alone (≥ 1)."""
    chunk = float(table.chunk_tokens)
    per_token = table.prefill_s_per_token
    bare = (table.decode_step(1.0, 0.0) + per_token * (chunk - 1.0)) / (chunk - 1.0)
    budget = table.prompt_budget(running)
    if budget <= 0.0:
        return chunk  # no room for prompt tokens: as good as stalled
    mixed = (table.decode_step(running, context_tokens) + per_token * budget) / budget
    return max(mixed / bare, 1.0)


def forecast(
    *,
    predicted_ttft_s: float,
    state: ReplicaState | None,
    table: DecodeStepTable | None,
    ratio: float,
    spread: float,
    prompt_rate: float,
    request_rate: float,
    input_tokens: int,
    output_tokens: int,
    own_prefill_s: float | None = None,
    observed: ChunkShares | None = None,
    by_work: bool = False,
    computed_share: float = 1.0,
    seconds_per_token: float | None = None,
    tpot_ratio: float = 1.0,
    slot_wait_s: float = 0.0,
    slot_rate_wait_s: float = 0.0,
    slot_queue_wait_s: float = 0.0,
) -> Forecast:
    """The forecast for a request on the replica whose live state is ``state`` and decode
    table is ``table`` (None: an unknown replica, judged by its calibrated TTFT alone).
    ``ratio`` and ``spread`` calibrate the route path's ``predicted_ttft_s`` once stretched
    by :func:`interleave` (see :mod:`serving.admission.ttft_calibration`). ``own_prefill_s``
    (the part of the prediction that is the request's own prefill) splits the TTFT into its
    own part, alone on the replica (the prior's, neither stretched nor calibrated), and the
    wait for the queue (the rest). ``observed``: the chunk shares the replica's recent decodes
    of this length saw (:mod:`serving.admission.tpot_calibration`). ``slot_wait_s``: the wait
    for a LoRA adapter slot before its prefill starts (:mod:`serving.route.adapter_slots`),
    added to the stretched prediction (the caller calibrates such forecasts apart: ``ratio``
    and ``spread`` are then those of the replica's slot-waiting requests);
    ``slot_rate_wait_s`` and ``slot_queue_wait_s``, its two forecasts, are kept in the
    forecast for the calibrations to learn each (``slot_wait_s`` is one of them). With ``by_work``
    (see the module docstring) ``prompt_rate`` counts prompt tokens to compute,
    ``computed_share`` is their share of the tokens received (it scales the router's count of
    the prompt tokens queued), ``seconds_per_token`` what a computed token cost a chunk there
    lately (None: the kind's linear cost alone) and ``tpot_ratio`` corrects the steps; without
    it the three are ignored."""
    own = wait = None
    if own_prefill_s is not None:
        # not calibrated: the ratio also learns queueing the prediction misses, which would
        # call a request that only waits too long one that cannot be served in time
        own = min(own_prefill_s, predicted_ttft_s)
    running = others = 0.0
    prior = predicted_ttft_s  # an unknown replica: its calibrated TTFT alone
    if state is not None and table is not None:
        running = max(float(state.in_flight), state.num_requests_running) + 1.0
        others = state.kv_cache_usage_perc * state.kv_capacity_tokens
        prior *= interleave(table, running, others)
    prior += slot_wait_s
    ttft = prior * ratio
    if own is not None:
        wait = max(ttft - own, 0.0)
    if state is None or table is None or output_tokens <= 1:
        return Forecast(
            ttft_s=ttft,
            ttft_spread=spread,
            prior_ttft_s=prior,
            own_s=own,
            wait_s=wait,
            slot_wait_s=slot_wait_s,
            slot_rate_wait_s=slot_rate_wait_s,
            slot_queue_wait_s=slot_queue_wait_s,
        )
    step = table.decode_step(running, others + input_tokens)
    budget = table.prompt_budget(running)
    queued = float(queued_ahead_tokens(state))
    if by_work:
        # a chunk is ``budget`` tokens to compute, each at what one cost there lately (its
        # attention over the context it joins: long cached prefixes cost more than linear
        # layers); ``prompt_rate`` counts prompt work in the same tokens
        chunk = budget
        per_token = table.prefill_s_per_token
        if seconds_per_token is not None and seconds_per_token > per_token:
            per_token = seconds_per_token
        queued *= computed_share
    else:
        # seconds per prompt token as the replica receives them: the calibration ratio
        # discounts the share of them its prefix cache holds (and corrects its prefill speed)
        per_token = table.prefill_s_per_token * ratio
        # a chunk is ``budget`` tokens *to compute* — the cached prefix is never in it — so it
        # takes the kind's own prefill time per token, and carries ``budget / ratio`` of the
        # prompt tokens as received (their cached share rides along for free)
        chunk = budget / ratio if ratio > 0.0 else budget
        tpot_ratio = 1.0
    gaps = output_tokens - 1
    # expected prompt tokens per decode iteration: those arriving while it waits, spread over
    # its decode, plus those arriving while it decodes (a share ρ = c·λ of the time)
    behind = prompt_rate * ttft / gaps
    load = per_token * prompt_rate
    shared = chunk  # prompt work arriving faster than it is prefilled fills every iteration
    if load < 1.0:
        shared = min(chunk, (behind + prompt_rate * step) / (1.0 - load))
    return Forecast(
        ttft_s=ttft,
        ttft_spread=spread,
        prior_ttft_s=prior,
        tpot_s=step + per_token * shared,
        step_s=step,
        full_step_s=step + per_token * chunk,
        gaps=gaps,
        budget_tokens=chunk,
        prompt_rate=prompt_rate,
        request_rate=request_rate,
        observed_tpot_s=state.tpot_s,
        queued_tokens=queued,
        own_s=own,
        wait_s=wait,
        observed=observed,
        tpot_ratio=tpot_ratio,
        slot_wait_s=slot_wait_s,
        slot_rate_wait_s=slot_rate_wait_s,
        slot_queue_wait_s=slot_queue_wait_s,
    )
