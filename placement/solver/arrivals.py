"""Arrival profile: each demand unit's arrivals counted in short bins over the planning window.

A unit's rate is its mean over the window; how the arrivals bunch inside the window (bursts
of a tenant, a conversation's turns, a batch job's submissions) is what queues replicas and
misses TTFT SLOs at a planned load the mean says is comfortable. The counts per bin keep that
burstiness at every time scale down to :data:`ARRIVAL_BIN_S`, measured from the unit's own
timestamps, for the plan's attainment model (:mod:`placement.solver.attainment`), with the
bins aligned across units so units arriving together are seen together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# width of a bin (s), chosen on the what-if scenario double-tenant (bench/RESULTS.md)
ARRIVAL_BIN_S = 0.5
MAX_BINS = 512  # a longer window takes wider bins


def arrival_counts(
    arrivals: Sequence[Sequence[float]], window_s: float
) -> tuple[npt.NDArray[np.float64], float]:
    """``(counts[d, b], bin width)``: unit ``d``'s arrivals in bin ``b`` of the window, which
    starts at the first arrival of any unit; later arrivals fall into the last bin."""
    starts = [a[0] for a in arrivals if len(a)]
    if not starts or window_s <= 0:
        return np.zeros((len(arrivals), 0)), 0.0
    n_bins = min(max(math.ceil(window_s / ARRIVAL_BIN_S), 1), MAX_BINS)
    width = window_s / n_bins
    t0 = min(starts)
    counts = np.zeros((len(arrivals), n_bins))
    for d, a in enumerate(arrivals):
        if len(a):
            at = ((np.asarray(a, dtype=np.float64) - t0) / width).astype(np.int64)
            counts[d] = np.bincount(np.minimum(at, n_bins - 1), minlength=n_bins)
    return counts, width
