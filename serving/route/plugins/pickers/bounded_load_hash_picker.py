"""``bounded-load-hash-picker``: consistent hashing with bounded loads over the model pool
(Mirrokni, Thorup, Zadimoghaddam, SODA 2018), for prefixes the plan has not seen.

The key is the request's block hash at the profile's ``ring.key_blocks`` depth (its first
block by default, so every request sharing that block meets the same replicas in the same
order). Walking the
pool's ring clockwise from the key, it takes the first eligible replica whose in-flight count
after placement stays within

    ceil((1 + ε) · (pool in flight + 1) / pool size)

(:func:`placement.domain.scoring.load_bound`, the rule of the simulator's ``chbl`` peer). The walk
probes at most the context's ``limit`` eligible replicas; if none is within the bound there
(only possible when part of the pool is down), the probed ones are ranked by in-flight count.
After the choice come the next healthy replicas clockwise, for a proxy to retry.

Parameters: ``epsilon`` (> 0, default 0.25).
"""

from __future__ import annotations

from placement.domain.scoring import load_bound
from serving.route.plugins.base import FallbackContext, ReplicaScorer
from serving.route.plugins.params import Params

DEFAULT_EPSILON = 0.25
RANKED = 4  # replicas ranked: the choice and three for a proxy to try next


class BoundedLoadHashPicker:
    name = "bounded-load-hash-picker"
    signals: tuple[str, ...] = ("in_flight", "pool in-flight total", "block_hashes")

    def __init__(self, *, epsilon: float = DEFAULT_EPSILON) -> None:
        self.epsilon = epsilon

    def rank(self, ctx: FallbackContext) -> list[int]:
        fleet = ctx.fleet
        model = ctx.query.model
        pool = fleet.pools.get(model)
        if not pool:
            return []
        total = fleet.pool_in_flight[fleet.pool_of[pool[0]]]
        bound = load_bound(total, 1.0 / len(pool), self.epsilon)
        states = fleet.states
        eligible = ctx.eligible
        over: list[int] = []
        order = ctx.ring_order()
        for i in order:
            if not eligible(i):
                continue
            if states[i].in_flight + 1 <= bound:
                # the next replicas clockwise that are up are where a proxy retries: checking
                # health alone keeps the alternates cheap on this hot path
                ranked = [i]
                for j in order:
                    if states[j].healthy:
                        ranked.append(j)
                        if len(ranked) >= RANKED:
                            break
                return ranked
            over.append(i)
            if len(over) >= ctx.limit:
                break
        return sorted(over, key=lambda i: states[i].in_flight)

    @classmethod
    def from_params(
        cls, params: Params, scorers: tuple[tuple[ReplicaScorer, float], ...]
    ) -> BoundedLoadHashPicker:
        made = cls(epsilon=params.number("epsilon", DEFAULT_EPSILON, minimum=0, above=True))
        params.finish()
        return made
