"""Predicted attainment: the probability a request the plan admits meets its class SLO on the
replica the plan sends it to, from the engine's iteration times at the planned load.

Per replica, its planned mix (rate ``λ_d`` per demand unit, uncached prompt ``P_d`` tokens,
``O_d`` output tokens) on its kind's iteration-time model (:mod:`sim.costmodel`, the
simulator's own):

* **Prefill** of a request: its uncached prompt in chunks of the engine's token budget,
  ``s_d = Σ_chunks linear(chunk) + attention(chunk, context)``.
* **Decoding**: with ``n`` sequences running, one iteration takes ``t(n)``; ``n = Σ λ_d·E_d``
  (Little's law) with ``E_d = TTFT_d + O_d·TPOT``, found by a few fixed-point steps.
* **TPOT**: decode iterations stretched by the prefill work interleaved with them,
  ``TPOT = t(n) / (1 − ρ_p)``, ``ρ_p = Σ λ_d·s_d·m_d`` where ``m_d`` is the share of a prompt's
  prefill time alone that it adds to an iteration already running the ``n`` decodes
  (``linear(n + chunk) − linear(n)`` against ``overhead + linear(chunk)``: the decodes already
  pay the overhead and the weights' read; :func:`marginal_share`), but never past an iteration
  that fills the token budget (each decode takes one token of every iteration and prefill the
  rest, so past that the prefill queue grows, not the decode step); a request meets the TPOT
  SLO with probability ``Φ(ln(SLO/TPOT)/σ)`` (:data:`TPOT_SPREAD` = σ, per-request spread of
  TPOT around its mean).
* **TTFT**: the wait for the prefill server plus the request's own prefill. Prefill tokens ride
  the decode iterations up to the token budget, so a request's work on that server is
  ``w_d = s_d + (P_d / budget)·t(n)`` and its own latency ``s_d + ⌈P_d / budget⌉·t(n)``. The
  wait has two parts, both from what the plan already knows:

  - the **bursts** of the arrivals, measured: each unit's arrivals per short bin of the
    planning window (:mod:`placement.solver.arrivals`), thinned by the share of the unit the
    plan sends to this replica, give the replica's work per bin; the backlog a request finds
    in its bin is the fluid queue of that work (Lindley's recursion, :func:`fluid_backlog`);
  - the **short-scale** queueing inside a bin: Kingman's G/G/1 mean wait at the replica's
    utilisation ``ρ = Σ λ_d·w_d``, Poisson inside the bin (``c_a² = 1``) and the service
    times' squared CV ``c_s²`` from the mix *and* each unit's prompt-length spread
    (``E[w_d²] = w_d²·(1 + cv²(P_d))``), with the exponential tail of that mean
    (``P(wait > x) = ρ·exp(−x·ρ/W)``). :func:`ttft_meet` computes both parts for ``c`` servers
    sharing the work (Allen–Cunneen's M/G/c, Erlang C in place of ``ρ``); this model takes one
    server per replica, :mod:`placement.solver.pooled_attainment` one queue per pool.

  A request misses when backlog + wait exceeds ``SLO − own latency``, its own latency taken at
  the unit's prompt spread (lognormal of the unit's mean and cv², three Gauss–Hermite nodes):
  a unit whose mean prompt prefills in time may still hold prompts that do not. The TTFT side
  keeps ``s_d``, the prompt's prefill time alone: with the marginal share ``m_d`` there too the
  what-if scenario ``tighter-ttft`` came out 10–13 points above the simulator at TTFT SLOs of
  0.5 and 0.25 s (``bench/RESULTS.md``, "The decode step beside prefill").

Without arrival times (synthetic instances) the arrivals are Poisson at the planned rate and at
``ρ ≥ 1`` only ``1/ρ`` of the work is served in time at best (the wait taken at
:data:`RHO_MAX`). Kinds without a cost model (synthetic instances: fake accelerator names) take
service times from the capacity at SLO instead: ``w_d = ρ_at_cap / capacity[d, k]`` with
:data:`UTILISATION_AT_CAPACITY`, and no TPOT term.

Only admitted traffic is counted: shed traffic is reported as shed, not as missed. But the
load is what the route path sends: a unit's whole rate split by the plan's weights, its shed
share included (nothing on the route path enforces the plan's shed; the admission gate refuses
by its own forecast), so a replica carries its weight of a partly shed unit's traffic. Nothing is
fitted to the simulator: the one choice, the bin width, was made on the what-if scenario
``double-tenant`` (held out: the others; ``bench/RESULTS.md``, "Predicted attainment from
measured arrivals").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from placement.solver.instance import FloatArray, Instance
from sim.costmodel.base import IterationCostModel

TPOT_SPREAD = 0.25  # σ of ln(per-request TPOT / mean TPOT)
UTILISATION_AT_CAPACITY = 0.8  # fallback: GPU busy share at the capacity at SLO
FIXED_POINT_STEPS = 4
RHO_MAX = 0.99  # the queue's utilisation is taken no closer to 1 than this
CHUNK_TOKENS = 2048  # the engine's default token budget per iteration (DEFAULT_MAX_BATCHED_TOKENS)


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """One replica's planned mix: rate, uncached prompt, output tokens, TTFT and TPOT SLOs
    and (fallback) capacity at SLO, per unit placed there."""

    rate: FloatArray
    prompt: FloatArray
    output: FloatArray
    ttft_slo: FloatArray
    tpot_slo: FloatArray
    capacity: FloatArray
    prompt_scv: FloatArray | None = None  # squared CV of each unit's prompt (None: 0)


@lru_cache(maxsize=64)
def _cost_model(accelerator: str, model: str, tp: int) -> IterationCostModel | None:
    from placement.domain.accelerators import get_accelerator
    from placement.domain.llm import get_model
    from placement.errors import InputError
    from sim.costmodel.factory import cost_model_for

    try:
        return cost_model_for(get_accelerator(accelerator), get_model(model), tp)
    except InputError:
        return None


# prefill time tabulated per kind on a geometric grid of prompt lengths, interpolated in log space
PREFILL_GRID = np.geomspace(1.0, 1 << 17, 53)


@lru_cache(maxsize=64)
def _prefill_table(accelerator: str, model: str, tp: int) -> FloatArray | None:
    cost = _cost_model(accelerator, model, tp)
    if cost is None:
        return None
    # whole chunks once (cumulative), then each grid prompt's last partial chunk
    n_chunks = int(PREFILL_GRID[-1]) // CHUNK_TOKENS
    whole = np.concatenate(
        [
            [0.0],
            np.cumsum(
                [
                    cost.linear_s(CHUNK_TOKENS)
                    + cost.prefill_attention_s(CHUNK_TOKENS, i * CHUNK_TOKENS)
                    for i in range(n_chunks)
                ]
            ),
        ]
    )
    out = []
    for p in PREFILL_GRID:
        full, rest = divmod(round(p), CHUNK_TOKENS)
        t = float(whole[full])
        if rest:
            t += cost.linear_s(rest) + cost.prefill_attention_s(rest, full * CHUNK_TOKENS)
        out.append(t)
    return np.asarray(out)


# token-linear time tabulated per kind up to twice the token budget, interpolated
LINEAR_GRID = np.unique(np.round(np.geomspace(1.0, 2.0 * CHUNK_TOKENS, 48)))


def _linear_of(cost: IterationCostModel) -> FloatArray:
    return np.asarray([cost.linear_s(int(t)) for t in LINEAR_GRID])


@lru_cache(maxsize=64)
def _linear_table(accelerator: str, model: str, tp: int) -> FloatArray | None:
    cost = _cost_model(accelerator, model, tp)
    return None if cost is None else _linear_of(cost)


def marginal_share(
    cost: IterationCostModel, linear: FloatArray, n: float, prompts: FloatArray
) -> FloatArray:
    """Per prompt (tokens): the share of its prefill time alone (chunks of the token budget,
    each paying the iteration's overhead and reading the weights) that it adds to iterations
    already running ``n`` decodes: its chunk of what is left of the budget costs
    ``linear(n + chunk) − linear(n)`` there, against ``overhead + linear(chunk)`` alone
    (``linear``: the kind's :data:`LINEAR_GRID` table)."""
    k = max(float(round(n)), 1.0)
    chunk = np.clip(np.minimum(prompts, CHUNK_TOKENS - k), 1.0, None)

    def lin(tokens: FloatArray) -> FloatArray:
        out: FloatArray = np.interp(tokens, LINEAR_GRID, linear)
        return out

    alone = cost.overhead_s + lin(chunk)
    added = lin(chunk + k) - lin(np.full_like(chunk, k))
    share: FloatArray = np.clip(added / alone, 0.0, 1.0)
    return share


def prefill_times(table: FloatArray, prompts: FloatArray) -> FloatArray:
    """Prefill seconds of each prompt (tokens) from a kind's :func:`_prefill_table`."""
    x = np.log(np.clip(prompts, 1.0, PREFILL_GRID[-1]))
    out: FloatArray = np.exp(np.interp(x, np.log(PREFILL_GRID), np.log(table)))
    return out


def _prefill_s(cost: IterationCostModel, prompt: float) -> float:
    left, context, total = max(float(prompt), 1.0), 0, 0.0
    while left > 0:
        chunk = int(min(left, CHUNK_TOKENS))
        total += cost.linear_s(chunk) + cost.prefill_attention_s(chunk, context)
        context += chunk
        left -= chunk
    return total


def _iteration_s(cost: IterationCostModel, n: float, context: float) -> float:
    k = max(round(n), 1)
    d0, d1 = cost.decode_attention_coeffs(k)
    return float(cost.overhead_s + cost.linear_s(k) + d0 + d1 * context * k)


def _full_iteration_s(
    cost: IterationCostModel, n: float, context: float, chunk_context: float
) -> float:
    """An iteration that fills the token budget: ``n`` decodes (one token each, over
    ``context``) and a prefill chunk of the rest over ``chunk_context`` cached tokens."""
    k = max(round(n), 1)
    d0, d1 = cost.decode_attention_coeffs(k)
    chunk = max(CHUNK_TOKENS - k, 0)
    return float(
        cost.overhead_s
        + cost.linear_s(max(CHUNK_TOKENS, k))
        + (cost.prefill_attention_s(chunk, round(chunk_context)) if chunk else 0.0)
        + d0
        + d1 * context * k
    )


def _normal_cdf(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return out


def wait_exceeds(rho: float, mean_wait: float, x: FloatArray) -> FloatArray:
    """P(wait > x) when an arrival waits with probability ``rho`` (a single server's
    utilisation; Erlang C on several) and the mean wait is ``mean_wait`` (see module doc)."""
    if rho <= 0 or mean_wait <= 0:
        return np.where(x < 0, 1.0, 0.0)
    tail = np.minimum(rho * np.exp(-np.maximum(x, 0.0) * (rho / mean_wait)), 1.0)
    out: FloatArray = np.where(x < 0, 1.0, tail)
    return out


def fluid_backlog(work: FloatArray, bin_s: float) -> FloatArray:
    """Per bin ``b`` (last axis), the prefill backlog (s of work) at the start of the bin of a
    server that does ``bin_s`` of work per bin and is given ``work[..., b]`` in bin ``b``,
    starting empty: Lindley's recursion ``B[b+1] = max(0, B[b] + work[b] - bin_s)``, as the
    reflected walk ``S - min(0, min S)`` of its partial sums ``S``."""
    steps = np.cumsum(work - bin_s, axis=-1)
    walk = np.concatenate([np.zeros((*work.shape[:-1], 1)), steps[..., :-1]], axis=-1)
    out: FloatArray = walk - np.minimum.accumulate(np.minimum(walk, 0.0), axis=-1)
    return out


# prompt lengths inside a unit: lognormal of the unit's mean and squared CV, taken at the
# three Gauss–Hermite nodes (weights 1/6, 2/3, 1/6)
_NODES = np.asarray([-math.sqrt(3.0), 0.0, math.sqrt(3.0)])
_WEIGHTS = np.asarray([1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0])


@dataclass(frozen=True, slots=True)
class ReplicaService:
    """What a replica's planned mix fixes for each of its units: a request's work on the
    prefill server (s), its own latency at the unit's prompt-spread nodes (s, ``[d, node]``)
    and the probability it meets its TPOT SLO (the decode batch the mix runs)."""

    work: FloatArray
    own: FloatArray
    tpot_ok: FloatArray


def replica_service(
    load: ReplicaLoad,
    cost: IterationCostModel | None,
    prefill_table: FloatArray | None = None,
    linear_table: FloatArray | None = None,
) -> ReplicaService:
    """The service ``load`` gets on a replica of ``cost``'s kind (see the module doc: prefill,
    decoding, TPOT; ``work`` is infinite where a fallback capacity is 0)."""
    lam = load.rate
    scv_p = load.prompt_scv if load.prompt_scv is not None else np.zeros_like(lam)
    if cost is None:
        with np.errstate(divide="ignore"):
            work = np.where(load.capacity > 0, UTILISATION_AT_CAPACITY / load.capacity, np.inf)
        return ReplicaService(work, np.zeros((len(lam), len(_NODES))), np.ones_like(lam))
    # the unit's mean prompt, then its prompt spread (the request's own prefill)
    sigma = np.sqrt(np.log1p(scv_p))[:, None]
    prompts = load.prompt[:, None] * np.exp(sigma * _NODES - sigma**2 / 2)
    every = np.concatenate([load.prompt, prompts.ravel()])
    times = (
        prefill_times(prefill_table, every)
        if prefill_table is not None
        else np.asarray([_prefill_s(cost, p) for p in every])
    )
    prefill, own_pre = times[: len(lam)], times[len(lam) :].reshape(prompts.shape)
    linear = linear_table if linear_table is not None else _linear_of(cost)
    total = max(float(lam.sum()), 1e-12)
    context = float((lam * (load.prompt + load.output / 2)).sum() / total)
    chunk_context = float((lam * load.prompt).sum() / total) / 2.0
    n, tpot = 1.0, _iteration_s(cost, 1.0, context)
    for _ in range(FIXED_POINT_STEPS):
        # what the prompts add to the decodes' iterations they ride (the weights are read
        # once an iteration: the decodes pay for that)
        share = marginal_share(cost, linear, n, load.prompt)
        rho_p = float((lam * prefill * share).sum())
        # decodes take one token of every iteration and prefill the rest of the token
        # budget: prefill stretches a decode step to at most a full iteration
        tpot = min(
            _iteration_s(cost, n, context) / max(1.0 - rho_p, 0.05),
            _full_iteration_s(cost, n, context, chunk_context),
        )
        n = max(float((lam * (prefill + load.output * tpot)).sum()), 1.0)
    # prefill tokens ride iterations with the running decodes, up to a token budget per
    # iteration: a request's work holds its share of those iterations, its own latency at
    # least one whole iteration per chunk
    it = _iteration_s(cost, n, context)
    work = prefill + np.maximum(load.prompt, 1.0) / CHUNK_TOKENS * it
    own = own_pre + np.ceil(np.maximum(prompts, 1.0) / CHUNK_TOKENS) * it
    with np.errstate(divide="ignore"):
        z = np.log(load.tpot_slo / tpot) / TPOT_SPREAD
    return ReplicaService(work, own, _normal_cdf(z))


def erlang_c(servers: int, offered: float) -> float:
    """The probability an arrival waits in an M/M/c queue of ``servers`` servers offered
    ``offered`` Erlangs (< ``servers``), from Erlang B's recursion; ``offered`` itself (the
    utilisation) for one server."""
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1.0 - rho * (1.0 - b))


def ttft_meet(
    rate: FloatArray,
    work: FloatArray,
    prompt_scv: FloatArray,
    slack: FloatArray,
    arrivals: FloatArray | None = None,
    bin_s: float = 0.0,
    servers: int = 1,
) -> FloatArray:
    """Per request stream (rate ``rate``, work ``work`` s with prompt spread ``prompt_scv``,
    TTFT slack ``slack[d, node]`` left after its own latency at the prompt-spread nodes):
    the probability its wait meets that slack on a queue of ``servers`` equal servers that
    share the work (each doing a second of it per second): the fluid backlog of the measured
    ``arrivals[d, b]`` per bin of ``bin_s`` s over the servers' summed capacity, plus the
    short-scale wait inside a bin — Kingman's G/G/1 mean on one server, the Allen–Cunneen
    M/G/c mean on several (Erlang C times the M/M/c wait, times ``(1 + c_s²)/2``), with the
    exponential tail of that mean. Without arrivals, Poisson at ``rate``, of which only
    ``1/ρ`` is served in time at ``ρ ≥ 1``."""
    if not np.all(np.isfinite(work)):
        return np.zeros_like(rate)
    rho = float((rate * work).sum()) / servers
    mean_w = float((rate * work).sum()) / float(rate.sum())
    # service times' second moment: across units and inside each (its prompt spread)
    second = float((rate * work**2 * (1.0 + prompt_scv)).sum() / rate.sum())
    scv = second / mean_w**2 - 1.0 if mean_w > 0 else 0.0
    r = min(rho, RHO_MAX)
    p_wait = erlang_c(servers, servers * r) if servers > 1 else r
    # Allen–Cunneen (Kingman on one server: p_wait = r), Poisson arrivals inside a bin
    mean_wait = p_wait / (servers * (1.0 - r)) * (1.0 + scv) / 2.0 * mean_w
    if arrivals is None or arrivals.shape[1] == 0 or bin_s <= 0:
        ok0: FloatArray = (1.0 - wait_exceeds(p_wait, mean_wait, slack)) @ _WEIGHTS
        over = min(1.0, 1.0 / rho) if rho > 0 else 1.0
        return ok0 * over
    # the bursts: the fluid backlog of each bin's work, halfway through the bin (it moves
    # linearly inside it); only the bins some unit arrives in
    bin_work = (work @ arrivals) / servers
    backlog = fluid_backlog(bin_work, bin_s)
    busy = arrivals.sum(axis=0) > 0
    arrivals = arrivals[:, busy]
    fluid = np.maximum(backlog[busy] + (bin_work[busy] - bin_s) / 2.0, 0.0)
    x = slack[:, :, None] - fluid  # [d, node, b]
    ok = np.where(x < 0, 0.0, 1.0 - wait_exceeds(p_wait, mean_wait, x))
    ok_n = np.einsum("dnb,n,db->d", ok, _WEIGHTS, arrivals)
    total = arrivals.sum(axis=1)
    out: FloatArray = np.where(total > 0, ok_n / np.maximum(total, 1e-12), 1.0)
    return out


def meet_probability(
    load: ReplicaLoad,
    cost: IterationCostModel | None,
    prefill_table: FloatArray | None = None,
    arrivals: FloatArray | None = None,
    bin_s: float = 0.0,
    linear_table: FloatArray | None = None,
) -> FloatArray:
    """Per unit of ``load``: the probability one of its requests meets its SLO there
    (``prefill_table``: the kind's tabulated prefill times, else computed per prompt;
    ``arrivals[d, b]``: unit ``d``'s planned arrivals at this replica in bin ``b`` of
    ``bin_s`` seconds, None: Poisson at the planned rate; ``linear_table``: the kind's
    token-linear times on :data:`LINEAR_GRID`, else computed)."""
    lam = load.rate
    if lam.sum() <= 0:
        return np.ones_like(lam)
    scv_p = load.prompt_scv if load.prompt_scv is not None else np.zeros_like(lam)
    svc = replica_service(load, cost, prefill_table, linear_table)
    slack = load.ttft_slo[:, None] - svc.own  # [d, node]
    ttft_ok = ttft_meet(lam, svc.work, scv_p, slack, arrivals, bin_s)
    out: FloatArray = np.clip(ttft_ok * svc.tpot_ok, 0.0, 1.0)
    return out


@dataclass(frozen=True, slots=True)
class PlanPairs:
    """A plan's (unit, replica) pairs, flattened over its pools, with what the route path sends
    on each (its weight of the unit's whole rate) and what a request there needs."""

    units: np.ndarray
    replicas: np.ndarray
    rate: FloatArray
    prompt: FloatArray  # uncached prompt tokens (the warm prefix taken off)
    output: FloatArray
    ttft: FloatArray
    tpot: FloatArray
    capacity: FloatArray
    share: FloatArray  # of the unit's arrivals
    prompt_scv: FloatArray | None
    timed: bool  # the instance has each unit's arrivals per bin


def plan_pairs(
    inst: Instance,
    pair_unit: list[np.ndarray],
    pair_replica: list[np.ndarray],
    pair_rate: list[np.ndarray],
    pair_warm: list[np.ndarray],
) -> PlanPairs:
    """The pools' pairs flattened (see :class:`PlanPairs`)."""
    units = np.concatenate(pair_unit) if pair_unit else np.zeros(0, dtype=np.int64)
    reps = np.concatenate(pair_replica) if pair_replica else np.zeros(0, dtype=np.int64)
    rate = np.concatenate(pair_rate) if pair_rate else np.zeros(0)
    # the route path sends a unit's whole rate by the plan's weights: nothing on it enforces
    # the plan's shed share (the gate refuses by its own forecast), so a replica carries its
    # weight of the unit's shed traffic too
    served = np.bincount(units, rate, inst.n_units)
    rate = rate * np.where(served > 0, inst.unit_rate / np.maximum(served, 1e-12), 1.0)[units]
    warm = np.concatenate(pair_warm) if pair_warm else np.zeros(0, dtype=np.bool_)
    prompt = np.where(
        warm,
        np.maximum(inst.unit_input[units] - inst.unit_prefix[units], 1.0),
        inst.unit_input[units],
    )
    kinds = inst.replica_kind[reps]
    return PlanPairs(
        units=units,
        replicas=reps,
        rate=rate,
        prompt=prompt,
        output=inst.unit_output[units],
        ttft=np.asarray([s.ttft_p95_s for s in inst.class_slo])[inst.unit_class[units]],
        tpot=np.asarray([s.tpot_p95_s for s in inst.class_slo])[inst.unit_class[units]],
        capacity=np.where(warm, inst.capacity[units, kinds], inst.capacity_cold[units, kinds]),
        share=rate / np.maximum(inst.unit_rate[units], 1e-12),
        prompt_scv=inst.unit_prompt_scv[units]
        if len(inst.unit_prompt_scv) == inst.n_units
        else None,
        timed=inst.unit_arrivals.shape[0] == inst.n_units and inst.arrival_bin_s > 0,
    )


def by_replica(pairs: PlanPairs) -> list[np.ndarray]:
    """The indices of the pairs the route path sends traffic on, one array per replica."""
    order = np.argsort(pairs.replicas, kind="stable")
    order = order[pairs.rate[order] > 0]
    bounds = np.flatnonzero(np.diff(pairs.replicas[order])) + 1
    return [idx for idx in np.split(order, bounds) if len(idx)]


def kind_name(inst: Instance, r: int) -> tuple[str, str, int]:
    """Replica ``r``'s (accelerator, model, tensor parallelism): its cost model's key."""
    k = int(inst.replica_kind[r])
    return inst.kind_accelerator[k], inst.models[int(inst.replica_model[r])], int(inst.kind_tp[k])


def replica_load(pairs: PlanPairs, idx: np.ndarray) -> ReplicaLoad:
    """The planned mix of the pairs ``idx`` (one replica's)."""
    return ReplicaLoad(
        pairs.rate[idx],
        pairs.prompt[idx],
        pairs.output[idx],
        pairs.ttft[idx],
        pairs.tpot[idx],
        pairs.capacity[idx],
        pairs.prompt_scv[idx] if pairs.prompt_scv is not None else None,
    )


def pair_arrivals(inst: Instance, pairs: PlanPairs, idx: np.ndarray) -> FloatArray | None:
    """The arrivals per bin the plan sends on the pairs ``idx`` (None: untimed instance)."""
    if not pairs.timed:
        return None
    out: FloatArray = inst.unit_arrivals[pairs.units[idx]] * pairs.share[idx, None]
    return out


def per_pool(meet: FloatArray, pair_unit: list[np.ndarray]) -> list[FloatArray]:
    """The flattened pairs' ``meet`` split back into the pools' pair arrays."""
    out = []
    start = 0
    for u in pair_unit:
        out.append(meet[start : start + len(u)])
        start += len(u)
    return out


def predicted_meet(
    inst: Instance,
    pair_unit: list[np.ndarray],
    pair_replica: list[np.ndarray],
    pair_rate: list[np.ndarray],
    pair_warm: list[np.ndarray],
) -> list[FloatArray]:
    """Per pool's (unit, replica) pairs: the probability a request sent on that pair meets
    its SLO, from each replica's whole planned mix."""
    pairs = plan_pairs(inst, pair_unit, pair_replica, pair_rate, pair_warm)
    meet = np.ones(len(pairs.units))
    for idx in by_replica(pairs):
        name = kind_name(inst, int(pairs.replicas[idx[0]]))
        meet[idx] = meet_probability(
            replica_load(pairs, idx),
            _cost_model(*name),
            _prefill_table(*name),
            pair_arrivals(inst, pairs, idx),
            inst.arrival_bin_s,
            _linear_table(*name),
        )
    return per_pool(meet, pair_unit)
