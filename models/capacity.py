"""Capacity at SLO: the highest arrival rate a replica kind takes while its predicted p95 TTFT
and TPOT hold, tabulated on a grid for O(1) lookups by the solver and the route path.

**Steady state at an arrival rate λ** (requests/s) of a workload mix — mean prompt ``I``
tokens of which a share ``h`` is served from the prefix cache, ``O`` output tokens:

- ``prompt_tokens_per_s = λ·I``, ``generation_tokens_per_s = λ·O``, ``prefix_cache_hit_rate = h``;
- ``num_requests_running = λ·E`` (Little's law), ``E`` the predicted end-to-end time
  ``ttft_p50 + (O − 1)·tpot_p50`` at that very load, found by fixed-point iteration from the
  zero-load ``E``. An iterate never falls below the one before (a running maximum, so the
  iteration settles even where the predictions fall as load rises), and every rate starts
  from the same zero-load ``E``, so its steady state does not depend on what was solved before
  (at most :data:`FIXED_POINT_ITERATIONS` steps; each row stops once it rises less than
  :data:`FIXED_POINT_TOLERANCE`);
- ``num_requests_waiting = 0``: a vLLM replica admits every request while it has sequence
  slots and KV memory, so in steady state nothing waits below saturation;
- ``kv_cache_usage_perc = (running·(I·(1 − h) + O/2) + I·h) / KV capacity`` (each running
  sequence holds its uncached prompt and on average half its output; the cached prefix once).

The replica is **saturated** when ``λ·E`` exceeds the sequences it can hold,
``S = min(max_num_seqs, (KV capacity − I·h) / (I·(1 − h) + O/2))``: no steady state exists.
So is a rate whose ``E`` or TTFT still rises after the last iteration: the queue of prompts
feeds its own TTFT (the backlog is ``λ·TTFT`` prompts) and has not settled.

**The load envelope.** The learned predictor is not constrained to be monotone in its
inputs (the constraints cost a tenth of the TTFT error: :mod:`models.quantile`), so the search
makes its own guarantee along the one path it sweeps. λ is **feasible** when the replica is not
saturated and the running maximum of the predicted p95 TTFT and TPOT over every rate reached on
the way up (:class:`LoadEnvelope`) is within the SLO: feasibility only shrinks as λ grows,
whatever the predictor does, and a dip of the predictions past a rate that breaks the SLO never
counts. The rates ``k·S/E(0)/``:data:`SCAN_STEPS` are visited in order until the first
infeasible one, then :data:`REFINE_STEPS` halvings of that step find the crossing (all cells
at once). A looser SLO never yields less capacity (the same path, stopped later). With no
predictor the uncalibrated :class:`RooflineBaseline` stands in.

**The table** holds capacities on geometric axes of mean input and output tokens and a tuple
of SLO levels; a cell holds the least capacity of the cells of no larger requests (the
envelope along request size: capacity never rises as requests grow, however the predictions
move with prompt and output length). A lookup rounds the token counts *up* to the next grid
point (so this never overstates it); beyond the last grid point the capacity there is
scaled down in proportion (``× last / x`` per axis). The index is computed arithmetically from
the axis' start and ratio: O(1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.features import RowInputs
from models.predictor import LatencyArrays, LatencyModel, RooflineBaseline
from models.roofline_prior import FloatArray, PriorInputs, ReplicaKind, kind_roofline
from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from placement.domain.requests import DEFAULT_CLASSES
from placement.errors import InputError

FIXED_POINT_ITERATIONS = 60
FIXED_POINT_TOLERANCE = 1e-4  # relative change of E that counts as converged
SCAN_STEPS = 16  # rates top·k/16 along the load path, in order
REFINE_STEPS = 12  # halvings of the step where the envelope first leaves the SLO


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadMix:
    """What a replica is asked to serve: mean prompt and output lengths (tokens) and the share
    of prompt tokens served from the prefix cache (0..1)."""

    mean_input_tokens: float
    output_tokens: float
    cached_share: float = 0.0


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency objectives on p95 TTFT and p95 TPOT (s)."""

    ttft_p95_s: float
    tpot_p95_s: float


DEFAULT_SLOS: tuple[Slo, ...] = tuple(
    Slo(c.ttft_slo_s, c.tpot_slo_s)
    for c in sorted(DEFAULT_CLASSES.values(), key=lambda c: (c.ttft_slo_s, c.tpot_slo_s))
)


@dataclass(frozen=True, slots=True)
class GeometricAxis:
    """Grid points ``start · ratio**i`` for ``i`` in ``0 … count − 1``."""

    start: float
    ratio: float
    count: int

    def __post_init__(self) -> None:
        if self.start <= 0 or self.ratio <= 1 or self.count < 1:
            raise InputError(
                f"axis start={self.start}, ratio={self.ratio}, count={self.count}",
                field="axis",
                expected="start > 0, ratio > 1, count ≥ 1",
            )

    @property
    def values(self) -> FloatArray:
        return self.start * self.ratio ** np.arange(self.count, dtype=np.float64)

    @property
    def last(self) -> float:
        return self.start * self.ratio ** (self.count - 1)

    def index_at_or_above(self, x: float) -> int:
        """Index of the smallest grid point ≥ ``x`` (clamped to the axis), in O(1)."""
        if x <= self.start:
            return 0
        i = math.ceil(math.log(x / self.start) / math.log(self.ratio) - 1e-9)
        return min(i, self.count - 1)


DEFAULT_INPUT_AXIS = GeometricAxis(128.0, 2.0, 10)  # 128 … 65,536 tokens
DEFAULT_OUTPUT_AXIS = GeometricAxis(16.0, 2.0, 9)  # 16 … 4,096 tokens


def _as_array(x: FloatArray | float, n: int) -> FloatArray:
    return np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)).copy()


@dataclass(frozen=True, slots=True, kw_only=True)
class MixArrays:
    """Workload mixes, one per element (tokens; cached share 0..1)."""

    mean_input: FloatArray
    cached_share: FloatArray
    output: FloatArray

    @property
    def uncached(self) -> FloatArray:
        return np.maximum(self.mean_input * (1.0 - self.cached_share), 1.0)

    @property
    def kv_per_sequence(self) -> FloatArray:
        return self.uncached + self.output / 2.0


def _check_mix(mix: MixArrays) -> None:
    checks = (
        ("mean_input_tokens", mix.mean_input, mix.mean_input >= 1),
        ("output_tokens", mix.output, mix.output >= 1),
        ("cached_share", mix.cached_share, (mix.cached_share >= 0) & (mix.cached_share < 1)),
    )
    for name, values, ok in checks:
        if not np.all(ok & np.isfinite(values)):
            raise InputError(
                f"{int((~ok).sum())} of {len(values)} values out of range",
                field=name,
                expected="tokens ≥ 1" if name != "cached_share" else "a share in [0, 1)",
            )


def sequence_slots(kind: ReplicaKind, mix: MixArrays) -> FloatArray:
    """S: the running sequences the replica can hold (max_num_seqs, KV memory)."""
    roof = kind_roofline(kind)
    shared = mix.mean_input * mix.cached_share
    by_memory = (roof.kv_capacity_tokens - shared) / mix.kv_per_sequence
    return np.maximum(np.minimum(float(roof.max_num_seqs), by_memory), 0.0)


def _steady_state_columns(
    kind: ReplicaKind,
    mix: MixArrays,
    rate: FloatArray,
    e2e: FloatArray,
    ttft: FloatArray | None,
) -> dict[str, FloatArray]:
    """The load and request columns of the steady state (the replica kind's aside).

    The router's backlog follows from Little's law too: ``λ·E`` requests in flight, of which
    ``λ·TTFT`` still wait for their first token, each with its uncached prompt to prefill; they
    arrived ``1/λ`` apart over the last TTFT, so the oldest has waited ``TTFT − 1/λ`` (0 when
    fewer than one waits). The router sends the replica ``λ`` requests per second.
    """
    roof = kind_roofline(kind)
    n = len(rate)
    running = rate * e2e
    ttft_s = ttft if ttft is not None else np.zeros(n)
    in_prefill = rate * ttft_s
    with np.errstate(divide="ignore"):
        oldest_wait = np.where(in_prefill >= 1.0, ttft_s - 1.0 / rate, 0.0)
    kv = (running * mix.kv_per_sequence + mix.mean_input * mix.cached_share) / (
        roof.kv_capacity_tokens
    )
    return {
        "num_requests_running": running,
        "num_requests_waiting": np.zeros(n),
        "kv_cache_usage_perc": np.clip(kv, 0.0, 1.0),
        "prompt_tokens_per_s": rate * mix.mean_input,
        "generation_tokens_per_s": rate * mix.output,
        "prefix_cache_hit_rate": np.broadcast_to(mix.cached_share, (n,)).astype(np.float64),
        "input_tokens": np.broadcast_to(mix.mean_input, (n,)).astype(np.float64),
        "uncached_tokens": np.minimum(mix.uncached, mix.mean_input),
        "output_tokens": np.broadcast_to(mix.output, (n,)).astype(np.float64),
        "backlog_requests": np.rint(running),
        "backlog_prefill_tokens": np.rint(in_prefill * mix.uncached),
        "backlog_oldest_wait_s": np.maximum(oldest_wait, 0.0),
        "routed_requests_per_s": rate.astype(np.float64, copy=True),
    }


def steady_state_rows(
    kind: ReplicaKind,
    mix: MixArrays,
    rate: FloatArray,
    e2e: FloatArray,
    ttft: FloatArray | None = None,
) -> pd.DataFrame:
    """Prediction rows of the steady state at ``rate`` req/s with end-to-end time ``e2e``
    (the table :func:`steady_state_inputs` builds without one)."""
    n = len(rate)
    columns = _steady_state_columns(kind, mix, rate, e2e, ttft)
    frame = pd.DataFrame(
        {
            "accelerator": [kind.accelerator.kind] * n,
            "model": [kind.model.name] * n,
            "tp": np.full(n, kind.tp, dtype=np.int64),
            **columns,
        }
    )
    for column in ("backlog_requests", "backlog_prefill_tokens"):
        frame[column] = frame[column].astype(np.int64)
    return frame


def steady_state_inputs(
    kind: ReplicaKind,
    mix: MixArrays,
    rate: FloatArray,
    e2e: FloatArray,
    ttft: FloatArray | None = None,
) -> RowInputs:
    """The same rows as :func:`steady_state_rows`, straight into a predictor's inputs."""
    c = _steady_state_columns(kind, mix, rate, e2e, ttft)
    prior = PriorInputs(
        kinds=(kind,),
        kind_index=np.zeros(len(rate), dtype=np.int64),
        input_tokens=c["input_tokens"],
        uncached_tokens=c["uncached_tokens"],
        output_tokens=c["output_tokens"],
        running=c["num_requests_running"],
        waiting=c["num_requests_waiting"],
        kv_usage=c["kv_cache_usage_perc"],
        prompt_tokens_per_s=c["prompt_tokens_per_s"],
        prefix_cache_hit_rate=c["prefix_cache_hit_rate"],
        backlog_prefill_tokens=c["backlog_prefill_tokens"],
    )
    return RowInputs(
        prior=prior,
        generation_tokens_per_s=c["generation_tokens_per_s"],
        backlog_requests=c["backlog_requests"],
        backlog_oldest_wait_s=c["backlog_oldest_wait_s"],
        routed_requests_per_s=c["routed_requests_per_s"],
    )


def _e2e(predicted: LatencyArrays, mix: MixArrays) -> FloatArray:
    ttft = predicted["ttft_p50"]
    tpot = predicted["tpot_p50"]
    e2e: FloatArray = ttft + np.maximum(mix.output - 1.0, 0.0) * tpot
    return e2e


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """The load a rate settles at: running sequences, predicted quantiles, saturation."""

    rate: FloatArray
    e2e_s: FloatArray
    running: FloatArray
    saturated: npt.NDArray[np.bool_]
    predicted: LatencyArrays


def steady_state(
    model: LatencyModel,
    kind: ReplicaKind,
    mix: MixArrays,
    rate: FloatArray,
) -> SteadyState:
    """Fixed point of ``E = e2e(load(rate, E))`` per element, iterated from the zero-load ``E``
    (see the module docstring)."""
    slots = sequence_slots(kind, mix)
    zero = np.zeros_like(rate)
    idle = model.predict_rows(steady_state_inputs(kind, mix, zero, zero))
    ttft = idle["ttft_p50"].astype(np.float64, copy=True)
    e2e = _e2e(idle, mix)
    active = rate > 0
    for _ in range(FIXED_POINT_ITERATIONS):
        active &= rate * e2e <= slots
        if not active.any():
            break
        rows = np.flatnonzero(active)
        sub = MixArrays(
            mean_input=mix.mean_input[rows],
            cached_share=mix.cached_share[rows],
            output=mix.output[rows],
        )
        step = model.predict_rows(steady_state_inputs(kind, sub, rate[rows], e2e[rows], ttft[rows]))
        new_ttft = step["ttft_p50"]
        new = _e2e(step, sub)
        # the iterates are running maxima: settled once neither the new E nor the new TTFT
        # (which sets the backlog of prompts) is above its iterate
        tolerance = FIXED_POINT_TOLERANCE
        moved = (new - e2e[rows] > tolerance * e2e[rows]) | (
            new_ttft - ttft[rows] > tolerance * ttft[rows]
        )
        ttft[rows] = np.maximum(new_ttft, ttft[rows])
        e2e[rows] = np.maximum(new, e2e[rows])
        active[rows[~moved]] = False
    predicted = model.predict_rows(steady_state_inputs(kind, mix, rate, e2e, ttft))
    running = rate * e2e
    return SteadyState(
        rate=rate,
        e2e_s=e2e,
        running=running,
        # still rising after the last iteration: no steady state (the queue keeps growing)
        saturated=(running > slots) | active,
        predicted=predicted,
    )


def solve_capacity(
    model: LatencyModel | None,
    kind: ReplicaKind,
    mix: MixArrays,
    ttft_slo_s: FloatArray,
    tpot_slo_s: FloatArray,
) -> FloatArray:
    """Capacity at SLO (req/s) of every (mix, SLO) element, solved together: the first crossing
    of the p95 envelope along rising load (see the module docstring)."""
    _check_mix(mix)
    latency: LatencyModel = model if model is not None else RooflineBaseline()
    n = len(mix.mean_input)
    at_zero = steady_state(latency, kind, mix, np.zeros(n))
    envelope = LoadEnvelope.start(at_zero.predicted)
    feasible_at_zero = envelope.within(ttft_slo_s, tpot_slo_s) & ~at_zero.saturated
    top = sequence_slots(kind, mix) / at_zero.e2e_s  # saturated there: an upper bound
    lo = np.zeros(n)
    hi = top.copy()
    scanning = feasible_at_zero.copy()
    for step in range(1, SCAN_STEPS + 1):
        rows = np.flatnonzero(scanning)
        if len(rows) == 0:
            break
        rate = top[rows] * (step / SCAN_STEPS)
        ok = _advance(latency, kind, mix, rows, rate, envelope, ttft_slo_s, tpot_slo_s)
        lo[rows[ok]] = rate[ok]
        hi[rows[~ok]] = rate[~ok]
        scanning[rows[~ok]] = False
    rows = np.flatnonzero(feasible_at_zero)
    for _ in range(REFINE_STEPS):
        mid = (lo[rows] + hi[rows]) / 2.0
        ok = _advance(latency, kind, mix, rows, mid, envelope, ttft_slo_s, tpot_slo_s)
        lo[rows[ok]] = mid[ok]
        hi[rows[~ok]] = mid[~ok]
    return np.where(feasible_at_zero, lo, 0.0)


@dataclass(slots=True)
class LoadEnvelope:
    """The running maximum of the predicted p95 TTFT and TPOT over the rates reached so far
    along each element's load path (every rate below the current feasible one, in order)."""

    ttft_p95: FloatArray
    tpot_p95: FloatArray

    @classmethod
    def start(cls, predicted: LatencyArrays) -> LoadEnvelope:
        return cls(
            predicted["ttft_p95"].astype(np.float64, copy=True),
            predicted["tpot_p95"].astype(np.float64, copy=True),
        )

    def within(self, ttft_slo_s: FloatArray, tpot_slo_s: FloatArray) -> npt.NDArray[np.bool_]:
        ok: npt.NDArray[np.bool_] = (self.ttft_p95 <= ttft_slo_s) & (self.tpot_p95 <= tpot_slo_s)
        return ok

    def reach(
        self, rows: npt.NDArray[np.int64], predicted: LatencyArrays
    ) -> tuple[FloatArray, FloatArray]:
        """The envelope of ``rows`` if the path went on to a rate with ``predicted``."""
        return (
            np.maximum(self.ttft_p95[rows], predicted["ttft_p95"]),
            np.maximum(self.tpot_p95[rows], predicted["tpot_p95"]),
        )


def _advance(
    latency: LatencyModel,
    kind: ReplicaKind,
    mix: MixArrays,
    rows: npt.NDArray[np.int64],
    rate: FloatArray,
    envelope: LoadEnvelope,
    ttft_slo_s: FloatArray,
    tpot_slo_s: FloatArray,
) -> npt.NDArray[np.bool_]:
    """Whether each element of ``rows`` stays feasible at ``rate`` (above its last feasible
    rate): not saturated and the envelope extended to it within the SLO. Feasible elements move
    their envelope there (in place). Each steady state starts from the zero-load ``E``, so it
    is the same whichever rates were visited before."""
    sub = MixArrays(
        mean_input=mix.mean_input[rows],
        cached_share=mix.cached_share[rows],
        output=mix.output[rows],
    )
    state = steady_state(latency, kind, sub, rate)
    ttft, tpot = envelope.reach(rows, state.predicted)
    ok: npt.NDArray[np.bool_] = (
        ~state.saturated & (ttft <= ttft_slo_s[rows]) & (tpot <= tpot_slo_s[rows])
    )
    moved = rows[ok]
    envelope.ttft_p95[moved], envelope.tpot_p95[moved] = ttft[ok], tpot[ok]
    return ok


def replica_kind(accelerator: str, model: str, tp: int) -> ReplicaKind:
    """A replica kind from catalogue names (InputError naming the unknown one)."""
    kind = ReplicaKind(
        get_accelerator(accelerator, field="accelerator"), get_model(model, field="model"), tp
    )
    kind_roofline(kind)  # raises if the model cannot be split over tp GPUs
    return kind


def capacity_at_slo(
    kind: ReplicaKind, mix: WorkloadMix, slo: Slo, model: LatencyModel | None = None
) -> float:
    """Highest arrival rate (req/s) at which ``kind`` holds ``slo`` for ``mix`` (the direct
    solve of one mix; a :class:`CapacityTable` cell is the least of these over the cells of no
    larger requests)."""
    arrays = MixArrays(
        mean_input=np.asarray([mix.mean_input_tokens], dtype=np.float64),
        cached_share=np.asarray([mix.cached_share], dtype=np.float64),
        output=np.asarray([mix.output_tokens], dtype=np.float64),
    )
    rate = solve_capacity(
        model, kind, arrays, np.asarray([slo.ttft_p95_s]), np.asarray([slo.tpot_p95_s])
    )
    return float(rate[0])


def _axis(raw: Any) -> GeometricAxis:
    start, ratio, count = raw
    return GeometricAxis(float(start), float(ratio), int(count))


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityTable:
    """Capacity at SLO of one replica kind, ``rates[i, j, k]`` (req/s) for input axis point
    ``i``, output axis point ``j`` and SLO level ``k``, at a fixed cached share."""

    kind: ReplicaKind
    cached_share: float
    input_axis: GeometricAxis
    output_axis: GeometricAxis
    slos: tuple[Slo, ...]
    rates: FloatArray

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        """Capacity (req/s) for a mix and the SLO level ``slo_index``, in O(1) (see the module
        docstring: tokens round up; beyond the grid, scaled down in proportion)."""
        i = self.input_axis.index_at_or_above(mean_input_tokens)
        j = self.output_axis.index_at_or_above(output_tokens)
        return self.beyond_grid(
            float(self.rates[i, j, slo_index]), mean_input_tokens, output_tokens
        )

    def beyond_grid(self, rate: float, mean_input_tokens: float, output_tokens: float) -> float:
        """``rate``, read at the grid's edge, scaled down in proportion for a mix beyond it
        (``× last / x`` per axis)."""
        if mean_input_tokens > self.input_axis.last:
            rate *= self.input_axis.last / mean_input_tokens
        if output_tokens > self.output_axis.last:
            rate *= self.output_axis.last / output_tokens
        return rate

    def slo_index(self, slo: Slo) -> int:
        """The level to use for ``slo``: itself if tabulated, else the loosest level at least as
        tight on both objectives (conservative). InputError if no level is that tight."""
        best = -1
        for k, level in enumerate(self.slos):
            if level == slo:
                return k
            tighter = level.ttft_p95_s <= slo.ttft_p95_s and level.tpot_p95_s <= slo.tpot_p95_s
            if tighter and (best < 0 or self.rates[..., k].sum() > self.rates[..., best].sum()):
                best = k
        if best < 0:
            raise InputError(
                f"no SLO level of the table is as tight as TTFT {slo.ttft_p95_s} s, "
                f"TPOT {slo.tpot_p95_s} s",
                field="slo",
                expected="one of "
                + ", ".join(f"({s.ttft_p95_s}, {s.tpot_p95_s})" for s in self.slos),
            )
        return best

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (catalogue names, axes, SLO levels, nested rates)."""
        return {
            "accelerator": self.kind.accelerator.kind,
            "model": self.kind.model.name,
            "tp": self.kind.tp,
            "cached_share": self.cached_share,
            "input_axis": [self.input_axis.start, self.input_axis.ratio, self.input_axis.count],
            "output_axis": [self.output_axis.start, self.output_axis.ratio, self.output_axis.count],
            "slos": [[s.ttft_p95_s, s.tpot_p95_s] for s in self.slos],
            "rates": self.rates.tolist(),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "<capacity table>") -> CapacityTable:
        try:
            table = cls(
                kind=replica_kind(str(raw["accelerator"]), str(raw["model"]), int(raw["tp"])),
                cached_share=float(raw["cached_share"]),
                input_axis=_axis(raw["input_axis"]),
                output_axis=_axis(raw["output_axis"]),
                slos=tuple(Slo(float(a), float(b)) for a, b in raw["slos"]),
                rates=np.asarray(raw["rates"], dtype=np.float64),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"malformed capacity table ({exc!s})", source=source) from None
        shape = (table.input_axis.count, table.output_axis.count, len(table.slos))
        if table.rates.shape != shape:
            raise InputError(
                f"rates have shape {table.rates.shape}",
                source=source,
                field="rates",
                expected=f"shape {shape}",
            )
        return table


def build_capacity_table(
    kind: ReplicaKind,
    model: LatencyModel | None = None,
    *,
    cached_share: float = 0.0,
    input_axis: GeometricAxis = DEFAULT_INPUT_AXIS,
    output_axis: GeometricAxis = DEFAULT_OUTPUT_AXIS,
    slos: tuple[Slo, ...] = DEFAULT_SLOS,
) -> CapacityTable:
    """Solve every grid cell at once (``model=None``: the roofline baseline); each cell then
    holds the least capacity of the cells of no larger requests."""
    if not slos:
        raise InputError("no SLO levels", field="slos", expected="at least one Slo")
    ii, jj, kk = np.meshgrid(
        np.arange(input_axis.count),
        np.arange(output_axis.count),
        np.arange(len(slos)),
        indexing="ij",
    )
    flat = (ii.ravel(), jj.ravel(), kk.ravel())
    mix = MixArrays(
        mean_input=input_axis.values[flat[0]],
        cached_share=_as_array(cached_share, len(flat[0])),
        output=output_axis.values[flat[1]],
    )
    ttft = np.asarray([s.ttft_p95_s for s in slos])[flat[2]]
    tpot = np.asarray([s.tpot_p95_s for s in slos])[flat[2]]
    solved = solve_capacity(model, kind, mix, ttft, tpot).reshape(ii.shape)
    # the envelope along request size: no cell above a cell of smaller requests
    rates = np.minimum.accumulate(np.minimum.accumulate(solved, axis=0), axis=1)
    return CapacityTable(
        kind=kind,
        cached_share=cached_share,
        input_axis=input_axis,
        output_axis=output_axis,
        slos=slos,
        rates=rates,
    )
