"""Min-max normalisation of raw signals into scorer grades in [0, 1]."""

from __future__ import annotations

from collections.abc import Sequence


def lower_is_better(values: Sequence[float]) -> list[float]:
    """(max - v) / (max - min) per value: the least gets 1, the most 0; all equal → all 1."""
    lo = min(values)
    hi = max(values)
    if hi == lo:
        return [1.0] * len(values)
    span = hi - lo
    return [(hi - v) / span for v in values]
