"""Per-tenant credit accounting in the style of the Virtual Token Counter (Sheng et al., 2024,
"Fairness in Serving Large Language Models").

Each tenant has a counter of the service it received, divided by the tenant's credit weight:
either prefill tokens times ``prefill_weight`` plus decode tokens times ``decode_weight``
(:meth:`VirtualTokenCounter.start` / :meth:`~VirtualTokenCounter.finish`), or what its requests
cost in GPU-seconds on the replicas that served them (:meth:`~VirtualTokenCounter.start_cost` /
:meth:`~VirtualTokenCounter.finish_cost`, priced by :mod:`serving.admission.cost`) — the
admission gate charges the latter. A tenant with twice the weight may receive twice the
service for the same counter. Fairness is ordering by counter: the tenant with the lowest
counter is furthest *under* its share, the highest furthest *over*.

A tenant that goes idle must not bank credit: when it becomes active again its counter is
lifted to the minimum over the active tenants (or, when none is active, to the counter of the
last tenant that left), so it competes from where the others stand, not from where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PREFILL_WEIGHT = 1.0
DEFAULT_DECODE_WEIGHT = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenWeights:
    prefill: float = DEFAULT_PREFILL_WEIGHT
    decode: float = DEFAULT_DECODE_WEIGHT


class VirtualTokenCounter:
    """Counters per tenant and who is active (has requests in flight)."""

    def __init__(
        self,
        *,
        credit_weights: Mapping[str, float] | None = None,
        token_weights: TokenWeights = TokenWeights(),
    ) -> None:
        self._credit_weights = dict(credit_weights or {})
        self._token_weights = token_weights
        self.counters: dict[str, float] = {}
        self._active: dict[str, int] = {}  # tenant → requests in flight
        self._last_left = 0.0

    def credit_weight(self, tenant: str) -> float:
        return self._credit_weights.get(tenant, 1.0)

    def set_credit_weights(self, weights: Mapping[str, float]) -> None:
        self._credit_weights = {t: w for t, w in weights.items() if w > 0}

    def is_active(self, tenant: str) -> bool:
        return self._active.get(tenant, 0) > 0

    def active_tenants(self) -> list[str]:
        return list(self._active)

    def _floor(self) -> float:
        if self._active:
            return min(self.counters[t] for t in self._active)
        return self._last_left

    def counter(self, tenant: str) -> float:
        """The tenant's counter as it would stand if it arrived now (lifted if idle)."""
        own = self.counters.get(tenant, 0.0)
        return own if self.is_active(tenant) else max(own, self._floor())

    def start(self, tenant: str, prefill_tokens: int) -> None:
        """A request of ``tenant`` was admitted: lift an idle tenant, count it active, charge
        its prompt (weighted tokens)."""
        self.start_cost(tenant, self._token_weights.prefill * prefill_tokens)

    def start_cost(self, tenant: str, cost: float) -> None:
        """A request of ``tenant`` was admitted: lift an idle tenant, count it active, charge
        ``cost`` (its prompt's, in the counter's unit)."""
        active = self._active
        held = active.get(tenant, 0)
        if held <= 0:
            self.counters[tenant] = self.counter(tenant)
        active[tenant] = held + 1
        self.add(tenant, cost)

    def charge(self, tenant: str, *, prefill_tokens: int, decode_tokens: int) -> None:
        self.add(
            tenant,
            self._token_weights.prefill * prefill_tokens
            + self._token_weights.decode * decode_tokens,
        )

    def add(self, tenant: str, cost: float) -> None:
        """Charge ``cost`` to ``tenant``'s counter (divided by its credit weight)."""
        counters = self.counters
        counters[tenant] = counters.get(tenant, 0.0) + cost / self._credit_weights.get(tenant, 1.0)

    def finish(self, tenant: str, decode_tokens: int) -> None:
        """A request of ``tenant`` completed having generated ``decode_tokens``."""
        self.finish_cost(tenant, self._token_weights.decode * decode_tokens)

    def finish_cost(self, tenant: str, cost: float) -> None:
        """A request of ``tenant`` completed; charge ``cost`` (its decode's)."""
        self.add(tenant, cost)
        left = self._active.get(tenant, 0) - 1
        if left > 0:
            self._active[tenant] = left
        elif tenant in self._active:
            del self._active[tenant]
            self._last_left = self.counters[tenant]

    def lead(self, tenant: str) -> float:
        """How far the tenant's counter stands above the lowest active counter (0 when it is
        the lowest, alone, or nobody is active): service received past its share, in the
        counters' unit per credit weight."""
        if not self._active:
            return 0.0
        lowest = min(self.counters[t] for t in self._active)
        return max(self.counter(tenant) - lowest, 0.0)

    def over_credit(self, tenant: str) -> float:
        """Where the tenant stands among the active tenants: 0 at the lowest counter (most
        owed), 1 at the highest (furthest over its share); 0 when alone."""
        if not self._active:
            return 0.0
        mine = self.counter(tenant)
        values = [self.counters[t] for t in self._active]
        lo, hi = min(*values, mine), max(*values, mine)
        return 0.0 if hi <= lo else (mine - lo) / (hi - lo)

    def snapshot(self) -> dict[str, float]:
        """The counters to persist (relative to the floor, so a restart keeps the order
        between tenants without carrying large absolute values forever)."""
        base = min(self.counters.values(), default=0.0)
        return {t: c - base for t, c in self.counters.items()}

    def restore(self, counters: Mapping[str, float]) -> None:
        """Resume persisted counters; nobody is in flight after a restart."""
        self.counters = {t: float(c) for t, c in counters.items()}
        self._active.clear()
        self._last_left = min(self.counters.values(), default=0.0)
