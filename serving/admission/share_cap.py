"""A cap on a tenant's share of its pool past capacity: what it was served lately against its
credit-weighted max-min entitlement to what the pool served.

The Virtual Token Counters (:mod:`serving.admission.vtc`) order tenants by the service they
received over their whole lifetime, per unit of credit. That order is right, but its distances
are not rates: a tenant whose requests are cheap next to its credit (one-token answers) stays in
flight and is never lifted, so its counter lags the fair level by more every second, and every
other tenant's lead over it — the lead the gate's credit slack compares with a fixed number —
grows with the run's length, whether the tenant takes its share or four times it. The standing
among the active tenants (0 to 1 from the lowest counter to the highest) is set at its top by
a tenant of a few requests priced at thousands of units each against a tiny credit. On
``multi-model``'s tail at 2× overload the tenants served 3.4–3.7× their entitlement stood at
0.10–0.17 and led by 1,200–1,900 GPU-seconds per share, the base-model tenant at its entitlement
by 280 (up to 560) (bench/RESULTS.md).

So this module measures shares as rates, over a window: per model pool (the replicas that can
serve a request's model), each tenant's **offered** cost (every request judged, priced as the
gate charges it, :mod:`serving.admission.cost`) and **served** cost (what was dispatched: what
the gate decides, whether or not it then met its SLO), both decayed with time constant
``window_s``. The pool's served cost is split max-min fair in
proportion to the tenants' credits, no tenant entitled to more than it offered (water-filling:
every tenant gets ``min(offered, level × credit)``, the ``level`` filling what was served). A
tenant served more than ``cap`` times its entitlement is over its share, and yields until its
recent service decays back under the cap (:meth:`ShareCap.yields_for`).
The rule is work-conserving by construction: a tenant is over its share only while another in
its pool offered more than it was served, and a pool where every tenant is served what it asks
has nobody over it.

The pool is the model's, not the replicas a model may be swapped onto: on ``multi-model`` the
7–8B models share eight swappable H100s, and one pool for the two (a reasoning tenant yielding
while adapter tenants were owed) lost 1.8–3.6% of the goodput at loads 1–1.5 of seed 0's tail —
within a plan period what a Qwen replica frees no Llama request can use (bench/RESULTS.md).
Nor is a request served late taken back from its tenant (as the fairness figures count only
goodput): the adapter tenants whose admitted requests miss waiting for a LoRA slot then look
owed, the tenants that meet are refused for them, and the slot wait stays; on ``multi-model``'s
seed-1 tail that lost 5.7% of the goodput at load 1.5 (bench/RESULTS.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from placement.errors import InputError

# decay time constant of the offered and served costs, seconds (tuned on the heads)
DEFAULT_SHARE_WINDOW_S = 30.0
# the pool's fair level is recomputed at most this often (seconds): a water-filling over the
# pool's tenants, kept between
LEVEL_REFRESH_S = 0.25


def water_level(demands: list[float], weights: list[float], total: float) -> float:
    """The level ``ℓ`` at which ``Σ min(demand_i, ℓ · weight_i) = total`` (weights > 0);
    ``inf`` when ``total`` covers every demand (nobody need be held to a share)."""
    if total >= sum(demands):
        return math.inf
    order = sorted(range(len(demands)), key=lambda i: demands[i] / weights[i])
    left, weight_left = total, sum(weights)
    for i in order:
        level = left / weight_left
        if demands[i] > level * weights[i]:
            return level
        left -= demands[i]
        weight_left -= weights[i]
    return math.inf  # unreachable: total < Σ demands leaves a tenant unfilled


@dataclass(slots=True)
class _Pool:
    """One pool's decayed costs per tenant and its cached fair level."""

    offered: dict[str, float] = field(default_factory=dict)
    served: dict[str, float] = field(default_factory=dict)
    at: dict[str, float] = field(default_factory=dict)  # when each tenant's costs were decayed
    level: float = math.inf
    level_at: float | None = None


class ShareCap:
    """Offered and served cost per pool and tenant, and who is past ``cap`` × its share."""

    def __init__(self, cap: float, *, window_s: float = DEFAULT_SHARE_WINDOW_S) -> None:
        if not cap >= 1.0:
            raise InputError(f"{cap}", field="share_cap", expected=">= 1 (× the entitlement)")
        if not window_s > 0:
            raise InputError(f"{window_s}", field="share_window_s", expected="> 0 seconds")
        self.cap = cap
        self.window_s = window_s
        self._pools: dict[str, _Pool] = {}

    def _pool(self, pool: str) -> _Pool:
        got = self._pools.get(pool)
        if got is None:
            got = self._pools[pool] = _Pool()
        return got

    def _decay(self, p: _Pool, tenant: str, now: float) -> None:
        last = p.at.get(tenant)
        p.at[tenant] = now
        if last is None or now <= last:
            return
        keep = math.exp(-(now - last) / self.window_s)
        p.offered[tenant] = p.offered.get(tenant, 0.0) * keep
        p.served[tenant] = p.served.get(tenant, 0.0) * keep

    def offer(self, pool: str, tenant: str, cost: float, now: float) -> None:
        """``tenant`` asked ``pool`` for a request costing ``cost`` (GPU-seconds) at ``now``."""
        p = self._pool(pool)
        self._decay(p, tenant, now)
        p.offered[tenant] = p.offered.get(tenant, 0.0) + cost
        p.served.setdefault(tenant, 0.0)

    def serve(self, pool: str, tenant: str, cost: float, now: float) -> None:
        """``pool`` took a request of ``tenant`` costing ``cost`` at ``now``."""
        p = self._pool(pool)
        self._decay(p, tenant, now)
        p.served[tenant] = p.served.get(tenant, 0.0) + cost
        p.offered.setdefault(tenant, 0.0)

    def level(self, pool: str, weight: Callable[[str], float], now: float) -> float:
        """The pool's fair level now (served cost per unit of credit a tenant is entitled to
        before its own demand caps it; ``inf`` when every tenant was served what it offered),
        recomputed at most every :data:`LEVEL_REFRESH_S`."""
        p = self._pool(pool)
        if p.level_at is not None and now - p.level_at < LEVEL_REFRESH_S:
            return p.level
        tenants = list(p.at)
        for t in tenants:
            self._decay(p, t, now)
        demands = [max(p.offered[t], p.served[t]) for t in tenants]
        weights = [max(weight(t), 1e-12) for t in tenants]
        p.level = water_level(demands, weights, sum(p.served[t] for t in tenants))
        p.level_at = now
        return p.level

    def ratio(self, pool: str, tenant: str, weight: Callable[[str], float], now: float) -> float:
        """``tenant``'s served cost over its entitlement in ``pool`` now (0 when it has none
        recorded; at most 1 while the pool serves everyone what they ask)."""
        level = self.level(pool, weight, now)
        p = self._pool(pool)
        if tenant not in p.at:
            return 0.0
        self._decay(p, tenant, now)
        served = p.served[tenant]
        entitled = min(max(p.offered[tenant], served), level * weight(tenant))
        return served / entitled if entitled > 0.0 else 0.0

    def yields_for(
        self, pool: str, tenant: str, weight: Callable[[str], float], now: float
    ) -> float:
        """0 when ``tenant`` is within ``cap`` × its entitlement in ``pool``; otherwise how
        long (seconds) until its recent service, decaying while the pool's level holds, is
        back under the cap: when to try again."""
        ratio = self.ratio(pool, tenant, weight, now)
        if ratio <= self.cap:
            return 0.0
        return self.window_s * math.log(ratio / self.cap)
