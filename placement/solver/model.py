"""The placement model of one model pool: variables, constraints and objective as a
:class:`~placement.solver.lp.LinearProgram` built from numpy arrays (no per-pair Python loops).

Variables (candidate pairs ``p = (d, r)`` only, :mod:`placement.solver.candidates`):

* ``x[p] ∈ [0, 1]`` — share of unit ``d``'s traffic served on ``r`` with ``d``'s prefix warm
  there (for defaults: simply served there);
* ``c[p] ∈ [0, 1]`` — group units only: share served on ``r`` *cold*, prefix not kept warm
  (capacity at the whole prompt, no prefill saved, no KV). Without it a KV budget could make
  a group unservable although every replica has room for its traffic;
* ``y[p] ∈ {0, 1}`` — ``d``'s prefix kept warm on ``r`` (group units only, ``integer_warm``);
  in the relaxation ``y = x`` is optimal, so ``y`` is substituted away;
* ``stay[q] ∈ [0, prev[q]]`` — traffic left where the previous plan had it, ``stay ≤ x + c``.
  Both plans' shares sum to one, so ``Σ_r min(new, prev) = 1 − moved share`` per unit: a
  reward on ``stay`` is a churn penalty with no absolute values.

The shed share of ``d`` is ``1 − Σ_r (x + c)``. Constraints: ``Σ_r (x + c)[d, r] ≤ 1``; per
replica ``Σ_d (x/capacity + c/capacity_cold)·rate ≤ 1`` (utilisation at SLO: each unit at its
own class SLO, blended harmonically); per replica ``Σ warm prefix tokens ≤ KV budget``;
``x ≤ y``; per tenant, non-sheddable served ≥ floor and all served ≤ cap
(:meth:`Instance.tenant_credits`).

Objective (maximised, divided by the instance's total demand so it reads as a share):
``Σ rate·(x + c)·w·(1 − β·cost ratio) + α·Σ rate·x·prefix/prompt + γ·Σ rate·stay`` with ``w``
the tenant weight × ``2^−priority`` (priority-weighted goodput), ``α·prefix/prompt`` the prefill
tokens saved by warm caches, the cost ratio the pair's $ per req/s against the pool's median
(clipped so that serving never looks worse than shedding) and ``γ`` the churn weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.solver.candidates import Candidates
from placement.solver.instance import BoolArray, FloatArray, Instance, IntArray
from placement.solver.lp import LinearProgram, RowBuilder

PREFILL_SAVED_WEIGHT = 0.1  # α
COST_WEIGHT = 0.05  # β
COST_RATIO_CLIP = 4.0
CHURN_WEIGHT = 0.1  # γ
UTILISATION_CAP = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Weights:
    prefill_saved: float = PREFILL_SAVED_WEIGHT
    cost: float = COST_WEIGHT
    churn: float = CHURN_WEIGHT


@dataclass(frozen=True, slots=True)
class PoolModel:
    """The program of one pool and how its columns map back to pairs.

    Column blocks, in order: ``x`` (``n_pairs``), ``c`` (one per ``cold_pair``), ``stay`` (one
    per ``stay_pair``), ``y`` (one per ``y_pair``), deficits (one per ``floor_tenants``, only
    in the elastic program). Rows: first one per unit of ``units`` (``Σ_r (x + c) ≤ 1``),
    last one per ``stay_pair`` from ``stay_row0`` on (``stay ≤ x + c``)."""

    lp: LinearProgram
    units: IntArray
    pair_unit: IntArray
    pair_replica: IntArray
    n_pairs: int
    cold_pair: IntArray
    stay_pair: IntArray
    y_pair: IntArray
    floor: FloatArray  # per tenant (req/s)
    cap: FloatArray
    load: FloatArray  # per pair: utilisation of a full share served warm
    load_cold: FloatArray  # per pair: … served cold
    floor_tenants: IntArray
    stay_row0: int

    def served(self, sol: FloatArray) -> FloatArray:
        """Per pair, warm + cold share of a solution vector."""
        n = self.n_pairs
        out = sol[:n].copy()
        np.add.at(out, self.cold_pair, sol[n : n + len(self.cold_pair)])
        return out

    def utilisation(self, sol: FloatArray) -> FloatArray:
        """Per pair, the utilisation it adds to its replica."""
        n = self.n_pairs
        out = sol[:n] * self.load
        cold = sol[n : n + len(self.cold_pair)]
        np.add.at(out, self.cold_pair, cold * self.load_cold[self.cold_pair])
        return out


DEFAULT_WEIGHTS = Weights()


def unit_value(inst: Instance) -> FloatArray:
    """``w``: tenant weight × 2^−priority per unit."""
    w: FloatArray = inst.tenant_weight[inst.unit_tenant] * np.exp2(
        -inst.class_priority[inst.unit_class].astype(np.float64)
    )
    return w


def _pairs_le_zero(a: IntArray, b: IntArray, rb: RowBuilder, coef_b: float = -1.0) -> None:
    """Rows ``col_a − col_b ≤ 0`` for each aligned pair (b may repeat a column set)."""
    n = len(a)
    rows = np.repeat(np.arange(n), 2)
    cols = np.empty(2 * n, dtype=np.int64)
    cols[0::2] = a
    cols[1::2] = b
    rb.add(rows, cols, np.tile([1.0, coef_b], n), np.full(n, -np.inf), np.zeros(n))


def build_pool_model(
    inst: Instance,
    model: int,
    cands: Candidates,
    *,
    prev_share: FloatArray | None = None,
    weights: Weights = DEFAULT_WEIGHTS,
    integer_warm: bool = False,
    warm_support: BoolArray | None = None,
    elastic_floors: bool = False,
) -> PoolModel:
    """The pool's program over candidate pairs ``cands`` (all of this pool's model).

    ``prev_share[p]`` is the previous plan's share of the pair (churn). ``warm_support``, when
    given, fixes ``y``: warm service outside it is forbidden and the KV rows are dropped (the
    caller checked them). ``elastic_floors`` turns each floor into ``served + deficit ≥
    floor`` and the objective into ``−Σ deficit`` (the capacity-deficit program that explains
    infeasibility).
    """
    pu, pr = cands.unit, cands.replica
    n_p = len(pu)
    units = np.flatnonzero(inst.unit_model == model)
    local = np.full(inst.n_units, -1, dtype=np.int64)
    local[units] = np.arange(len(units))
    rate = inst.unit_rate[pu]
    kind = inst.replica_kind[pr]
    cap = inst.capacity[pu, kind]
    load = rate / np.maximum(cap, 1e-12)
    cap_cold = inst.capacity_cold[pu, kind]
    load_cold = np.where(cap_cold > 0, rate / np.maximum(cap_cold, 1e-12), np.inf)
    is_group = inst.unit_key[pu] >= 0
    cold_pair = np.flatnonzero(is_group & (cap_cold > 0))
    n_c = len(cold_pair)
    total = max(float(inst.unit_rate.sum()), 1e-12)
    share = rate / total

    value = unit_value(inst)[pu]
    cost_per_rps = inst.replica_cost[pr] / np.maximum(cap, 1e-12)
    ref = float(np.median(cost_per_rps)) if n_p else 1.0
    ratio = np.minimum(cost_per_rps / max(ref, 1e-12), COST_RATIO_CLIP)
    saved = inst.unit_prefix[pu] / np.maximum(inst.unit_input[pu], 1.0)
    obj_x = share * (value * (1.0 - weights.cost * ratio) + weights.prefill_saved * saved)
    ratio_cold = np.minimum(
        inst.replica_cost[pr] / np.maximum(cap_cold, 1e-12) / max(ref, 1e-12), COST_RATIO_CLIP
    )
    obj_c = (share * value * (1.0 - weights.cost * ratio_cold))[cold_pair]

    ub_x = np.ones(n_p)
    if warm_support is not None:
        ub_x = np.where(is_group & ~warm_support, 0.0, 1.0)

    if prev_share is None:
        prev_share = np.zeros(n_p)
    stay_pair = np.flatnonzero(prev_share > 0)
    n_s = len(stay_pair)
    y_pair = np.flatnonzero(is_group) if integer_warm else np.zeros(0, np.int64)
    n_y = len(y_pair)
    c0, s0, y0 = n_p, n_p + n_c, n_p + n_c + n_s
    d0 = y0 + n_y
    floor, tcap = inst.tenant_credits(model)
    tenants_here = np.unique(inst.unit_tenant[units])

    # every served column: (column, pair) — warm x then cold c
    srv_col = np.concatenate([np.arange(n_p), c0 + np.arange(n_c)])
    srv_pair = np.concatenate([np.arange(n_p), cold_pair])
    srv_load = np.concatenate([load, load_cold[cold_pair]])

    rb = RowBuilder()
    n_u = len(units)
    rb.add(local[pu[srv_pair]], srv_col, np.ones(len(srv_col)), np.full(n_u, -np.inf), np.ones(n_u))
    rep, rep_local = np.unique(pr, return_inverse=True)
    rb.add(
        rep_local[srv_pair],
        srv_col,
        srv_load,
        np.full(len(rep), -np.inf),
        np.full(len(rep), UTILISATION_CAP),
    )
    if warm_support is None:
        grp = y_pair if integer_warm else np.flatnonzero(is_group)
        if len(grp):
            krep, klocal = np.unique(pr[grp], return_inverse=True)
            kcols = (y0 + np.arange(n_y)) if integer_warm else grp
            rb.add(
                klocal,
                kcols,
                inst.unit_prefix[pu[grp]],
                np.full(len(krep), -np.inf),
                inst.replica_kv_budget[krep],
            )
        if integer_warm and n_y:
            _pairs_le_zero(y_pair, y0 + np.arange(n_y), rb)

    # tenant floors (non-sheddable served) and caps (all served)
    tenant_local = np.full(len(inst.tenants), -1, dtype=np.int64)
    tenant_local[tenants_here] = np.arange(len(tenants_here))
    srv_tenant = tenant_local[inst.unit_tenant[pu[srv_pair]]]
    srv_rate = rate[srv_pair]
    nonshed = ~inst.class_sheddable[inst.unit_class[pu[srv_pair]]]
    keep_rows = np.flatnonzero(floor[tenants_here] > 1e-9)
    n_d = len(keep_rows) if elastic_floors else 0
    if len(keep_rows):
        remap = np.full(len(tenants_here), -1, dtype=np.int64)
        remap[keep_rows] = np.arange(len(keep_rows))
        sel = nonshed & (remap[srv_tenant] >= 0)
        fr, fc, fv = remap[srv_tenant[sel]], srv_col[sel], srv_rate[sel]
        if elastic_floors:
            fr = np.concatenate([fr, np.arange(n_d)])
            fc = np.concatenate([fc, d0 + np.arange(n_d)])
            fv = np.concatenate([fv, np.ones(n_d)])
        rb.add(fr, fc, fv, floor[tenants_here[keep_rows]], np.full(len(keep_rows), np.inf))
    demand = np.bincount(inst.unit_tenant[units], inst.unit_rate[units], len(inst.tenants))
    capped = np.flatnonzero(tcap[tenants_here] < demand[tenants_here] - 1e-9)
    if len(capped):
        cremap = np.full(len(tenants_here), -1, dtype=np.int64)
        cremap[capped] = np.arange(len(capped))
        csel = cremap[srv_tenant] >= 0
        rb.add(
            cremap[srv_tenant[csel]],
            srv_col[csel],
            srv_rate[csel],
            np.full(len(capped), -np.inf),
            tcap[tenants_here[capped]],
        )
    # stay ≤ x + c
    stay_row0 = rb.n
    if n_s:
        where = np.full(n_p, -1, dtype=np.int64)
        where[stay_pair] = np.arange(n_s)
        in_stay = where[srv_pair] >= 0
        rows = np.concatenate([np.arange(n_s), where[srv_pair[in_stay]]])
        cols = np.concatenate([s0 + np.arange(n_s), srv_col[in_stay]])
        vals = np.concatenate([np.ones(n_s), -np.ones(int(in_stay.sum()))])
        rb.add(rows, cols, vals, np.full(n_s, -np.inf), np.zeros(n_s))

    row_lb, row_ub, rows_, cols_, vals_ = rb.arrays()
    n_vars = d0 + n_d
    ub = np.concatenate(
        [ub_x, np.ones(n_c), prev_share[stay_pair], np.ones(n_y), np.full(n_d, np.inf)]
    )
    if elastic_floors:
        obj = np.concatenate([np.zeros(d0), -np.ones(n_d)])
    else:
        obj = np.concatenate([obj_x, obj_c, weights.churn * share[stay_pair], np.zeros(n_y)])
    integer = np.zeros(n_vars, dtype=bool)
    integer[y0:d0] = True
    hint = np.concatenate(
        [np.minimum(prev_share, ub_x), np.zeros(n_c), prev_share[stay_pair], np.zeros(n_y)]
    )
    if n_y:
        hint[y0:] = (hint[y_pair] > 0).astype(np.float64)
    lp = LinearProgram(
        lb=np.zeros(n_vars),
        ub=ub,
        obj=obj,
        integer=integer,
        row_lb=row_lb,
        row_ub=row_ub,
        rows=rows_,
        cols=cols_,
        vals=vals_,
        hint=None if elastic_floors else hint,
    )
    return PoolModel(
        lp=lp,
        units=units,
        pair_unit=pu,
        pair_replica=pr,
        n_pairs=n_p,
        cold_pair=cold_pair,
        stay_pair=stay_pair,
        y_pair=y_pair,
        floor=floor,
        cap=tcap,
        load=load,
        load_cold=load_cold,
        floor_tenants=tenants_here[keep_rows],
        stay_row0=stay_row0,
    )
