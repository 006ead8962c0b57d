"""Prompt tokens per second the gate has sent each replica lately.

A request's prefill is ordered first come, first served; what arrives while it waits for its
first token is prefilled after it — during its decode, in the same iterations. How much that
is depends on the rate at which prompt work reaches the replica, which the router knows
better than anyone: it sent it. The rate is an exponentially decayed sum of the prompt
tokens dispatched, divided by its time constant :data:`RATE_WINDOW_S` (the order of a wait
plus a short decode: long enough to smooth single requests, short enough to follow a burst).

The gate's TPOT forecast by work (``SloGate(tpot_by_work=True)``, off by default) counts prompt
work as what a replica must compute: a prefix already cached there (the route path's expectation
at dispatch) rides in no chunk. :meth:`PromptRates.computed_rate` is that rate,
:meth:`PromptRates.computed_share` the share of the tokens received that are computed, and
:meth:`PromptRates.seconds_per_token` what a computed token cost a chunk lately, its attention
over the context it joins included. On ``kv-bound`` (61% of prompt tokens cached) counting a
prompt whole made an A100 look prefill-bound (bench/RESULTS.md).
"""

from __future__ import annotations

import math

RATE_WINDOW_S = 10.0


class PromptRates:
    """Per-replica decayed rates of dispatched prompt tokens (received and computed) and
    requests (per second)."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        # replica → (decayed prompt tokens, decayed requests, as of)
        self._sums: dict[str, tuple[float, float, float]] = {}
        # replica → (decayed tokens computed, decayed chunk seconds of them), same decay
        self._work: dict[str, tuple[float, float]] = {}

    def add(
        self,
        replica_id: str,
        tokens: int,
        now: float,
        cached_tokens: int = 0,
        work_s: float = 0.0,
    ) -> None:
        """A prompt of ``tokens`` went to the replica, ``cached_tokens`` of them cached there,
        costing ``work_s`` seconds of chunk time (0: not known)."""
        total, count, at = self._sums.get(replica_id, (0.0, 0.0, now))
        keep = self._keep(at, now)
        self._sums[replica_id] = (total * keep + tokens, count * keep + 1.0, max(at, now))
        computed, seconds = self._work.get(replica_id, (0.0, 0.0))
        new = max(tokens - max(cached_tokens, 0), 0)
        self._work[replica_id] = (computed * keep + new, seconds * keep + work_s)

    def rate(self, replica_id: str, now: float) -> float:
        """Prompt tokens per second, as received."""
        total, _, at = self._sums.get(replica_id, (0.0, 0.0, now))
        return total * self._keep(at, now) / self.window_s

    def computed_rate(self, replica_id: str, now: float) -> float:
        """Prompt tokens to compute per second (the cached prefixes left out)."""
        _, _, at = self._sums.get(replica_id, (0.0, 0.0, now))
        computed = self._work.get(replica_id, (0.0, 0.0))[0]
        return computed * self._keep(at, now) / self.window_s

    def request_rate(self, replica_id: str, now: float) -> float:
        """Requests per second."""
        _, count, at = self._sums.get(replica_id, (0.0, 0.0, now))
        return count * self._keep(at, now) / self.window_s

    def computed_share(self, replica_id: str) -> float:
        """The share of the prompt tokens received lately that the replica computes (1 when
        nothing was received)."""
        received = self._sums.get(replica_id, (0.0, 0.0, 0.0))[0]
        computed = self._work.get(replica_id, (0.0, 0.0))[0]
        return computed / received if received > 0.0 else 1.0

    def seconds_per_token(self, replica_id: str) -> float | None:
        """Chunk seconds per prompt token computed lately (None: none known): the new tokens'
        linear layers and their attention over the context they join."""
        computed, seconds = self._work.get(replica_id, (0.0, 0.0))
        return seconds / computed if computed > 0.0 and seconds > 0.0 else None

    def _keep(self, at: float, now: float) -> float:
        return math.exp(-(now - at) / self.window_s) if now > at else 1.0
