"""The plugin contracts of the route path (filters, scorers, fallback pickers).

Every plugin names what it measures (``name``), declares the live signals it reads
(``signals``: :class:`~serving.route.types.ReplicaState` fields or derived inputs), and is
built from its profile parameters by a ``from_params`` factory.

- A **filter** admits or refuses one replica; a refused *planned* replica sends the request to
  a fallback labelled with the filter's ``cause`` (``unhealthy``, ``stale``, ``over-cap``).
- A **scorer** grades candidates in [0, 1], higher is better.
- A **fallback picker** ranks candidates when the plan does not decide: best first, then the
  replicas a proxy should try next; an empty ranking means nothing is eligible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Protocol

from serving.route.compiled import CompiledPlan
from serving.route.fleet import FleetView
from serving.route.ring import key_of
from serving.route.types import ReplicaState, RouteQuery
from serving.route.waiting_queue import waiting_tokens


class ReplicaFilter(Protocol):
    name: str
    signals: tuple[str, ...]
    cause: str

    def admits(self, state: ReplicaState, cap_in_flight: float, now: float) -> bool: ...


class ReplicaScorer(Protocol):
    name: str
    signals: tuple[str, ...]

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]: ...


class FallbackPicker(Protocol):
    name: str
    signals: tuple[str, ...]

    def rank(self, ctx: FallbackContext) -> list[int]: ...


def queued_prefill_tokens(state: ReplicaState) -> float:
    """Prompt tokens ahead of a new request: the router's own count, or the scraped waiting
    queue priced in tokens when that is larger (:mod:`serving.route.waiting_queue`)."""
    waiting = waiting_tokens(state)
    own = state.in_flight_prefill_tokens
    return own if own > waiting else waiting


def queued_ahead_tokens(state: ReplicaState, priority: int | None = None) -> float:
    """:func:`queued_prefill_tokens` less the requests waiting for a LoRA adapter slot
    (:mod:`serving.route.adapter_slots`): the replica's scheduler lets a new request pass them,
    so they do not delay its first token. What the admission gate forecasts by; the pickers
    rank by the whole queue (a replica swapping adapters serves the requests holding its slots
    slower for every other request it takes, so its slot-waiting queue is load all the same).

    With ``priority``, on a replica scheduling by priority (the route path keeps its
    ``prefill_tokens_by_priority``), only the share of that queue of ``priority`` or better is
    ahead: the engine serves its waiting requests in priority order."""
    blocked = state.slot_waiting_requests
    if not blocked:
        queued = queued_prefill_tokens(state)
    else:
        waiting = waiting_tokens(state, blocked)
        own = state.in_flight_prefill_tokens - state.slot_waiting_tokens
        queued = own if own > waiting else waiting
    split = state.prefill_tokens_by_priority
    if priority is None or not split:
        return queued
    total = ahead = 0
    for p, tokens in split.items():
        total += tokens
        if p <= priority:
            ahead += tokens
    return queued * ahead / total if total > 0 else queued


@lru_cache(maxsize=1 << 16)
def _session_hash(tenant: str, model: str, adapter: str) -> int:
    """A 63-bit hash of a request with no prefix blocks: its tenant, model and adapter. Stable
    across processes (Python's own ``hash`` of a string is salted per process, which made the
    same seed route differently from one run to the next)."""
    digest = hashlib.blake2b(f"{tenant}\0{model}\0{adapter}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class FallbackContext:
    """What a fallback picker may read for one request: the query, the fleet, the plan (or
    None), the ring key, eligibility, and cache estimates.

    ``preferred`` replicas come first among the candidates (the plan's replicas for this key,
    or the replicas holding the prefix); ``cached[i]`` are prompt tokens replica ``i`` is
    expected to hold; ``limit`` bounds the candidates a picker considers.
    """

    __slots__ = ("cached", "eligible", "fleet", "key", "limit", "plan", "preferred", "query")

    def __init__(
        self,
        query: RouteQuery,
        fleet: FleetView,
        plan: CompiledPlan | None,
        eligible: Callable[[int], bool],
        preferred: tuple[int, ...],
        cached: dict[int, int],
        limit: int,
        key_blocks: int,
    ) -> None:
        self.query = query
        self.fleet = fleet
        self.plan = plan
        self.eligible = eligible
        self.preferred = preferred
        self.cached = cached
        self.limit = limit
        hashes = query.block_hashes
        if hashes:
            self.key = key_of(hashes[key_blocks - 1 if key_blocks <= len(hashes) else -1])
        else:
            self.key = key_of(_session_hash(query.tenant, query.model, query.adapter))

    def ring_order(self) -> Iterator[int]:
        """The pool clockwise from the key, each replica once (the common prefix of the walk
        comes from the ring's preference table)."""
        ring = self.fleet.rings.get(self.query.model)
        if ring is None:
            return
        head = ring.preference(self.key)
        yield from head
        if len(head) < ring.size:
            seen = set(head)
            for i in ring.successors(self.key):
                if i not in seen:
                    yield i

    def candidates(self) -> list[int]:
        """Up to ``limit`` eligible replicas of the pool: preferred first, then ring order."""
        out: list[int] = []
        eligible = self.eligible
        limit = self.limit
        model = self.query.model
        states = self.fleet.states
        for i in self.preferred:
            if i not in out and states[i].model == model and eligible(i):
                out.append(i)
                if len(out) >= limit:
                    return out
        for i in self.ring_order():
            if i not in out and eligible(i):
                out.append(i)
                if len(out) >= limit:
                    break
        return out

    def predicted_ttft(self, i: int) -> float:
        state = self.fleet.states[i]
        return self.fleet.tables[i].ttft(
            self.query.input_tokens - self.cached.get(i, 0), queued_prefill_tokens(state)
        )
