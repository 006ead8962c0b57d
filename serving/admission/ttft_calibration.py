"""How fast each replica really prefills, learned from its first tokens.

The route path predicts TTFT from the roofline prior (:mod:`serving.route.ttft`): own prefill
plus the prompt tokens queued ahead over the kind's prefill rate. The prior's rates come from
datasheet figures and fitted efficiencies; a real engine (or the simulator's measured
profiles) prefills at its own speed — on the shipped fleets 0.6–0.75 of the predicted time,
the same ratio at every queue length. The queue term also counts prompt tokens the replica
will find in its prefix cache, and chunked-prefill iterations shared with decoding sequences,
neither of which the table sees. All three scale the prediction, so the gate corrects it by
one factor per replica: the least-squares slope through the origin of observed on predicted
TTFT over the replica's recent first tokens,

    ratio = (Σ observed·predicted + W0) / (Σ predicted² + W0),

with sums decayed by :data:`CALIBRATION_DECAY` per first token (about the last 50) and
``W0`` = :data:`PRIOR_WEIGHT_S2` — the weight of one first token predicted at 1 s that came
on time — so the ratio starts at 1 (the prior as is) and is set by long waits, not by idle
replicas' millisecond prefills, whose error is the iteration in progress rather than the
prefill speed.

How far a calibrated forecast still errs is learned the same way: the spread ``σ`` of
``ln(observed / (ratio · predicted))``, weighted like the slope (long waits count), starting
from :data:`PRIOR_SPREAD` — what lets the gate say how *sure* a forecast miss is.

The gate feeds it (:meth:`TtftCalibration.dispatched` on admission,
:meth:`TtftCalibration.first_token` when the first token arrives); a caller that never reports
first tokens keeps the prior. Open requests are keyed by the identity of their query, as the
route path's hooks are, and at most :data:`MAX_OPEN` are remembered (the oldest are dropped).
"""

from __future__ import annotations

import math

CALIBRATION_DECAY = 0.02
PRIOR_WEIGHT_S2 = 1.0
PRIOR_SPREAD = 0.25  # relative error assumed before any first token (the prior's, roughly)
MAX_OPEN = 100_000


class TtftCalibration:
    """Per-replica ratio of observed to predicted TTFT (1.0 until first tokens are seen)."""

    def __init__(self) -> None:
        # replica → (Σ obs·pred, Σ pred², Σ pred²·ln(obs / (ratio·pred))²)
        self._sums: dict[str, tuple[float, float, float]] = {}
        # query identity → (replica, predicted TTFT, dispatch time, a second (key, prediction))
        self._open: dict[int, tuple[str, float, float, tuple[str, float] | None]] = {}

    def ratio(self, replica_id: str) -> float:
        xy, xx, _ = self._sums.get(replica_id, (0.0, 0.0, 0.0))
        return (xy + PRIOR_WEIGHT_S2) / (xx + PRIOR_WEIGHT_S2)

    def weight(self, replica_id: str) -> float:
        """The evidence behind this replica's ratio, in the prior's units (s²: the decayed
        Σ predicted²; 0 before any first token)."""
        return self._sums.get(replica_id, (0.0, 0.0, 0.0))[1]

    def spread(self, replica_id: str) -> float:
        """σ of the calibrated forecast's log error on this replica."""
        _, xx, rr = self._sums.get(replica_id, (0.0, 0.0, 0.0))
        return math.sqrt((rr + PRIOR_WEIGHT_S2 * PRIOR_SPREAD**2) / (xx + PRIOR_WEIGHT_S2))

    def dispatched(
        self,
        key: int,
        replica_id: str,
        predicted_ttft_s: float,
        now: float,
        *,
        also: tuple[str, float] | None = None,
    ) -> None:
        """Query ``key`` was sent at ``now``, its TTFT predicted ``predicted_ttft_s`` under
        ``replica_id``'s calibration; ``also``: a second (calibration, prediction) its first
        token teaches as well."""
        if len(self._open) >= MAX_OPEN:
            del self._open[next(iter(self._open))]
        self._open[key] = (replica_id, predicted_ttft_s, now, also)

    def first_token(self, key: int, now: float) -> None:
        record = self._open.pop(key, None)
        if record is None:
            return
        replica_id, predicted, sent, also = record
        self.observe(replica_id, predicted, now - sent)
        if also is not None:
            self.observe(also[0], also[1], now - sent)

    def forget(self, key: int) -> None:
        """The request ended without a first token worth learning from."""
        self._open.pop(key, None)

    def observe(self, replica_id: str, predicted_ttft_s: float, observed_ttft_s: float) -> None:
        if not (predicted_ttft_s > 0 and observed_ttft_s > 0):
            return
        calibrated = self.ratio(replica_id) * predicted_ttft_s
        error = math.log(observed_ttft_s / calibrated)
        xy, xx, rr = self._sums.get(replica_id, (0.0, 0.0, 0.0))
        keep = 1.0 - CALIBRATION_DECAY
        weight = predicted_ttft_s * predicted_ttft_s
        self._sums[replica_id] = (
            keep * xy + observed_ttft_s * predicted_ttft_s,
            keep * xx + weight,
            keep * rr + weight * error * error,
        )
