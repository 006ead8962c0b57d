"""Formulas routers share: min-max grades of raw signals in [0, 1], and the bounded-load cap
of consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def lower_is_better(values: Sequence[float]) -> list[float]:
    """(max - v) / (max - min) per value: the least gets 1, the most 0; all equal → all 1."""
    lo = min(values)
    hi = max(values)
    if hi == lo:
        return [1.0] * len(values)
    span = hi - lo
    return [(hi - v) / span for v in values]


def load_bound(total_outstanding: int, weight_share: float, epsilon: float) -> int:
    """Most requests a replica may hold after this placement."""
    # the tolerance keeps float noise (1.25 * 8 / 10 = 1.0000000000000002) from adding one
    return math.ceil((1.0 + epsilon) * (total_outstanding + 1) * weight_share - 1e-9)
