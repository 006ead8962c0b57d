"""Capacity at SLO from the engine's iteration times, by the plan's own attainment model.

The capacity tables of :mod:`models.capacity` take a latency model's predicted p95s at a
steady state; with the roofline prior or the predictors the loop learns they read well below
what one replica of the kind sustains (``placement bench capacity``: 0.3–0.7× the simulated
capacity with the prior, down to 0.03× with a learned model). The attainment model
(:mod:`placement.solver.attainment`) works from the kind's iteration-time model instead, and
the capacity it implies for a Poisson stream of one mix agrees with the simulated one
(``bench/RESULTS.md``, "Capacity at SLO against the engine"). This source tabulates that
capacity: for each cell of the table's grid, the highest rate at which the attainment model
says a request of the mix meets both SLOs with probability at least :data:`MEET_SHARE` (both
p95s holding, as independent events) and the running sequences (Little's law) fit the
replica's sequence slots and KV memory, found by doubling then geometric bisection. Kinds the
engine has no iteration-time model for fall back to the roofline prior's table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models.capacity import (
    DEFAULT_SLOS,
    CapacityTable,
    GeometricAxis,
    MixArrays,
    Slo,
    build_capacity_table,
    replica_kind,
    sequence_slots,
)
from placement.solver.attainment import (
    ReplicaLoad,
    _cost_model,
    _iteration_s,
    _linear_table,
    _prefill_s,
    _prefill_table,
    meet_probability,
)
from placement.solver.capacity import CapacityLookup

ENGINE_SOURCE = "engine iteration times (attainment model)"
MEET_SHARE = 0.95 * 0.95
# finer than the predictor tables' octaves: a lookup rounds up to the next grid point
INPUT_AXIS = GeometricAxis(128.0, math.sqrt(2.0), 19)  # 128 … 65,536 tokens
OUTPUT_AXIS = GeometricAxis(16.0, math.sqrt(2.0), 17)  # 16 … 4,096 tokens
DOUBLINGS = 22  # from 0.01 req/s: past 40,000 req/s, more than any replica serves
SATURATION_STEPS = 30
BISECTIONS = 12


def engine_rate(
    accelerator: str, model: str, tp: int, prompt: float, output: float, slo: Slo
) -> float | None:
    """The highest rate (req/s) at which one replica meets ``slo`` for a Poisson stream of
    ``prompt`` × ``output`` requests with probability ≥ :data:`MEET_SHARE`; None if the
    engine has no iteration-time model for the kind."""
    cost = _cost_model(accelerator, model, tp)
    if cost is None:
        return None
    prefill, linear = _prefill_table(accelerator, model, tp), _linear_table(accelerator, model, tp)
    mix = MixArrays(
        mean_input=np.asarray([float(prompt)]),
        cached_share=np.zeros(1),
        output=np.asarray([float(output)]),
    )
    slots = float(sequence_slots(replica_kind(accelerator, model, tp), mix)[0])
    own_prefill = _prefill_s(cost, math.ceil(prompt))  # whole tokens: a fraction never ends
    context = prompt + output / 2.0

    def fits(rate: float) -> bool:
        """Little's law against the sequences the replica holds: ``n = λ·E`` with ``E`` at
        least the prefill and ``O`` decode steps at ``n`` (prefill's stretch left out, so
        ``n`` is a lower bound); the steps grow with ``n``, so the iterates rise to it."""
        n = 1.0
        for _ in range(SATURATION_STEPS):
            n = rate * (own_prefill + output * _iteration_s(cost, n, context))
            if n > slots:
                return False
        return True

    load = ReplicaLoad(
        np.zeros(1),
        np.asarray([float(prompt)]),
        np.asarray([float(output)]),
        np.asarray([slo.ttft_p95_s]),
        np.asarray([slo.tpot_p95_s]),
        np.asarray([1.0]),
    )

    def meets(rate: float) -> bool:
        if not fits(rate):
            return False
        load.rate[0] = rate  # the one unit's rate; the rest of its mix stays
        p = meet_probability(load, cost, prefill, None, 0.0, linear)
        return bool(p[0] >= MEET_SHARE)

    lo, hi = 0.0, 0.01
    for _ in range(DOUBLINGS):
        if not meets(hi):
            break
        lo, hi = hi, hi * 2.0
    else:
        return lo
    if lo == 0.0:
        return 0.0
    for _ in range(BISECTIONS):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


def engine_capacity_table(
    accelerator: str,
    model: str,
    tp: int,
    *,
    slos: tuple[Slo, ...] = DEFAULT_SLOS,
    input_axis: GeometricAxis = INPUT_AXIS,
    output_axis: GeometricAxis = OUTPUT_AXIS,
) -> CapacityTable:
    """The kind's capacity table from :func:`engine_rate` (the roofline prior's table on the
    same axes when the engine has no model of the kind)."""
    kind = replica_kind(accelerator, model, tp)
    if _cost_model(accelerator, model, tp) is None:
        return build_capacity_table(
            kind, None, input_axis=input_axis, output_axis=output_axis, slos=slos
        )
    rates = np.zeros((input_axis.count, output_axis.count, len(slos)))
    for i, prompt in enumerate(input_axis.values):
        for j, output in enumerate(output_axis.values):
            for k, slo in enumerate(slos):
                rate = engine_rate(accelerator, model, tp, float(prompt), float(output), slo)
                rates[i, j, k] = rate or 0.0
    return CapacityTable(
        kind=kind,
        cached_share=0.0,
        input_axis=input_axis,
        output_axis=output_axis,
        slos=slos,
        rates=rates,
    )


def _bracket(axis: GeometricAxis, x: float) -> tuple[int, int, float]:
    """Grid points ``i ≤ j`` around ``x`` on ``axis`` and ``x``'s place between them in log
    space (0 at ``i``, 1 at ``j``), clamped to the axis."""
    if x <= axis.start:
        return 0, 0, 0.0
    pos = math.log(x / axis.start) / math.log(axis.ratio)
    if pos >= axis.count - 1:
        return axis.count - 1, axis.count - 1, 0.0
    i = int(pos)
    return i, i + 1, pos - i


@dataclass(frozen=True, slots=True)
class InterpolatedTable:
    """A :class:`CapacityTable` read between its grid points (log-linear in both token axes,
    and in the rate) rather than at the next point up: capacity falls as requests grow, so
    the value lies between the two neighbours' (beyond the grid: scaled down in proportion,
    as the table does)."""

    table: CapacityTable

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        t = self.table
        i0, i1, a = _bracket(t.input_axis, mean_input_tokens)
        j0, j1, b = _bracket(t.output_axis, output_tokens)
        cells = t.rates[[i0, i0, i1, i1], [j0, j1, j0, j1], slo_index]
        if np.any(cells <= 0):  # no log between a zero and a rate: the conservative corner
            rate = float(t.rates[i1, j1, slo_index])
        else:
            w = np.asarray([(1 - a) * (1 - b), (1 - a) * b, a * (1 - b), a * b])
            rate = float(np.exp(w @ np.log(cells)))
        return t.beyond_grid(rate, mean_input_tokens, output_tokens)

    def slo_index(self, slo: Slo) -> int:
        return self.table.slo_index(slo)


@dataclass
class EngineCapacity:
    """A :class:`~placement.solver.capacity.CapacitySource` of :func:`engine_capacity_table`
    per replica kind, built on first use."""

    slos: tuple[Slo, ...] = DEFAULT_SLOS
    input_axis: GeometricAxis = INPUT_AXIS
    output_axis: GeometricAxis = OUTPUT_AXIS
    _tables: dict[tuple[str, str, int], InterpolatedTable] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return ENGINE_SOURCE

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        key = (accelerator, model, tp)
        if key not in self._tables:
            self._tables[key] = InterpolatedTable(
                engine_capacity_table(
                    accelerator,
                    model,
                    tp,
                    slos=self.slos,
                    input_axis=self.input_axis,
                    output_axis=self.output_axis,
                )
            )
        return self._tables[key]
