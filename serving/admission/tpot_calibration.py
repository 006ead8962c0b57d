"""How often each replica's decodes really shared their iterations with prompt chunks, learned
from its completions.

The TPOT forecast (:meth:`serving.admission.forecast.Forecast.tpot_miss`) models the prompt work
that reaches a replica as a Poisson stream at its recent rate. Real arrivals come in bursts:
on the reasoning-vs-code mix (Azure code completions) the prompt tokens reaching the fleet in
one-second windows have a variance ~100× a Poisson stream's, so a request admitted in a lull
decodes through the burst that follows. A decode of a dozen tokens on an A100 or L40S, whose
iteration with a full prompt chunk is slower than the TPOT SLO, then misses it far more often
than the model says — at a load half the fleet's capacity, half of such decodes missed where
the model gave them under 1% — and the model cannot tell which (its chance of a miss ranks
them little better than chance), so the gate admitted them and its recall fell.

What the replica's own completions say is the **chunk share** ``f`` each decode saw: where its
observed TPOT lay between the forecast's decode-only step and its full-chunk step,
``f = (tpot − step) / (full − step)`` clipped to [0, 1]. A request misses its TPOT limit ``L``
when its share passes ``f* = (L − step) / (full − step)``; the share of recent decodes on the
replica past ``f*`` is the observed chance. Short decodes see all-or-nothing shares and long
ones their average, so decodes are kept apart by length (:func:`gaps_bucket`: 1–3, 4–15,
16–63, 64–255, ≥ 256 decode iterations), each a histogram of :data:`BINS` bins decayed by
:data:`DECAY` per completion (about the last 50). Where the gate chooses between replicas
(:meth:`serving.admission.slo_gate.SloGate.admit_decision`) the forecast blends the two,

    P(miss) = (w · observed + W0 · model) / (w + W0),

with ``w`` the decayed count of completions behind the observed share and ``W0`` =
:data:`PRIOR_WEIGHT` (the model stands until a few completions say otherwise). Fitted on the
head of the reasoning-vs-code mix over the heterogeneous fleet (loads 0.5, 0.8 and 1.4):
the Brier score of short decodes' TPOT misses on A100/L40S fell 0.32 / 0.38 / 0.32 →
0.29 / 0.29 / 0.24. The share is right on average but ranks the requests on one replica no
better than chance, so while the fleet keeps up a refusal is judged by the model alone: judged
by the blend, the TPOT refusals' precision on the head of ``mixed`` at load 1.0 fell 0.92 →
0.53. Past capacity (the gate's ``pressure``) the blend judges refusals too.

The gate feeds it (:meth:`TpotCalibration.dispatched` with the forecast it judged by,
:meth:`TpotCalibration.first_token`, :meth:`TpotCalibration.finished`). Open requests are
keyed by the identity of their query, at most :data:`MAX_OPEN` remembered.

For the gate's TPOT forecast by work (``SloGate(tpot_by_work=True)``, off by default) it also
learns each replica's **TPOT ratio** (:meth:`TpotCalibration.ratio`): its long decodes'
observed TPOT over the TPOT their forecast expected, a geometric mean shrunk toward 1 — the
step model's error there (on ``kv-bound`` the observed TPOT ran 1.3–1.6× the step model's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BINS = 20
DECAY = 0.02
PRIOR_WEIGHT = 2.0
MAX_OPEN = 100_000
BUCKET_LIMITS = (4, 16, 64, 256)  # decode iterations: [1, 4), [4, 16), … [256, ∞)


def gaps_bucket(gaps: int) -> int:
    """The decode-length bucket of a request with ``gaps`` decode iterations."""
    for k, top in enumerate(BUCKET_LIMITS):
        if gaps < top:
            return k
    return len(BUCKET_LIMITS)


def chunk_share(tpot_s: float, step_s: float, full_step_s: float) -> float:
    """Where ``tpot_s`` lies between the decode-only and the full-chunk step, in [0, 1]."""
    span = full_step_s - step_s
    if span <= 0.0:
        return 0.0
    return min(max((tpot_s - step_s) / span, 0.0), 1.0)


@dataclass(frozen=True, slots=True)
class ChunkShares:
    """A replica's decayed histogram of observed chunk shares for one decode length."""

    weights: tuple[float, ...]

    @property
    def total(self) -> float:
        return sum(self.weights)

    def past(self, share: float) -> float:
        """The observed share of decodes whose chunk share exceeded ``share`` (0 when none
        were observed); a decode in ``share``'s own bin counts by the part of the bin above."""
        total = self.total
        if total <= 0.0:
            return 0.0
        x = min(max(share, 0.0), 1.0) * BINS
        k = min(int(x), BINS - 1)
        above = sum(self.weights[k + 1 :]) + self.weights[k] * (k + 1 - x)
        return above / total


@dataclass(frozen=True, slots=True)
class _Open:
    replica_id: str
    step_s: float
    full_step_s: float
    first_token_s: float | None = None
    tpot_s: float = 0.0  # the forecast's expected TPOT


# a decode this long (iterations) averages what shares its iterations: its TPOT over the
# forecast's expected TPOT measures the forecast's error on the replica, not a coin toss
RATIO_FROM_GAPS = BUCKET_LIMITS[1]


class TpotCalibration:
    """Per replica and decode length, the chunk shares its completed decodes saw."""

    def __init__(self) -> None:
        self._shares: dict[tuple[str, int], list[float]] = {}
        self._open: dict[int, _Open] = {}
        self._log_ratio: dict[str, tuple[float, float]] = {}  # replica → (Σ w·ln r, Σ w)

    def ratio(self, replica_id: str) -> float:
        """The replica's observed TPOT over the forecast's expected TPOT, geometric mean over its
        recent decodes of at least :data:`RATIO_FROM_GAPS` iterations (decayed by
        :data:`DECAY` per decode), shrunk toward 1 by :data:`PRIOR_WEIGHT` decodes."""
        total, weight = self._log_ratio.get(replica_id, (0.0, 0.0))
        return math.exp(total / (weight + PRIOR_WEIGHT))

    def shares(self, replica_id: str, gaps: int) -> ChunkShares | None:
        """What decodes of ``gaps`` iterations saw on the replica (None: nothing yet)."""
        hist = self._shares.get((replica_id, gaps_bucket(gaps)))
        return None if hist is None else ChunkShares(tuple(hist))

    def dispatched(
        self, key: int, replica_id: str, step_s: float, full_step_s: float, tpot_s: float = 0.0
    ) -> None:
        """A request went to the replica forecast with these steps and expected TPOT (a TPOT
        forecast only)."""
        if full_step_s <= step_s:
            return
        if len(self._open) >= MAX_OPEN:
            del self._open[next(iter(self._open))]
        self._open[key] = _Open(replica_id, step_s, full_step_s, None, tpot_s)

    def first_token(self, key: int, now: float) -> None:
        record = self._open.get(key)
        if record is not None and record.first_token_s is None:
            self._open[key] = _Open(
                record.replica_id, record.step_s, record.full_step_s, now, record.tpot_s
            )

    def finished(self, key: int, output_tokens: int, now: float) -> None:
        """The request ended after ``output_tokens`` (its TPOT: the time since its first token
        over its decode iterations)."""
        record = self._open.pop(key, None)
        if record is None or record.first_token_s is None or output_tokens <= 1:
            return
        gaps = output_tokens - 1
        tpot = max(now - record.first_token_s, 0.0) / gaps
        self.observe(record.replica_id, gaps, chunk_share(tpot, record.step_s, record.full_step_s))
        if gaps >= RATIO_FROM_GAPS and record.tpot_s > 0.0 and tpot > 0.0:
            self.observe_ratio(record.replica_id, tpot / record.tpot_s)

    def observe_ratio(self, replica_id: str, ratio: float) -> None:
        """One long decode's observed TPOT over its forecast's expected TPOT."""
        total, weight = self._log_ratio.get(replica_id, (0.0, 0.0))
        keep = 1.0 - DECAY
        self._log_ratio[replica_id] = (total * keep + math.log(ratio), weight * keep + 1.0)

    def observe(self, replica_id: str, gaps: int, share: float) -> None:
        key = (replica_id, gaps_bucket(gaps))
        hist = self._shares.get(key)
        if hist is None:
            hist = self._shares[key] = [0.0] * BINS
        keep = 1.0 - DECAY
        for k in range(BINS):
            hist[k] *= keep
        hist[min(int(share * BINS), BINS - 1)] += 1.0
