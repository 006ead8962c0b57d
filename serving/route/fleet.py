"""The route path's index over the registered replicas, rebuilt whenever the set changes.

Replica *indices* are positions in :attr:`FleetView.states`; everything compiled (plan entries,
rings, prefill tables) refers to replicas by index, so the hot path reads lists, not dicts.
The :class:`~serving.route.types.ReplicaState` objects themselves stay the live state: the
scraper and the dispatch hooks write their attributes; the route path reads them lock-free.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.errors import InputError
from serving.route.ring import HashRing
from serving.route.ttft import PrefillTable, prefill_table
from serving.route.types import ReplicaState


class FleetView:
    """Registered replicas grouped into per-model pools, each with its hash ring.

    ``pool_in_flight[p]`` is the router's in-flight total over pool ``p`` (kept by the
    dispatch hooks; the bounded-load rule needs the total without a pass over the pool).
    """

    __slots__ = (
        "index_of",
        "pool_in_flight",
        "pool_of",
        "pools",
        "rings",
        "states",
        "tables",
    )

    def __init__(self, states: Sequence[ReplicaState], *, virtual_nodes: int) -> None:
        self.states: list[ReplicaState] = list(states)
        self.index_of: dict[str, int] = {}
        for i, s in enumerate(self.states):
            if s.id in self.index_of:
                raise InputError(f"replica {s.id!r} registered twice", field="replicas.id")
            self.index_of[s.id] = i
        members: dict[str, list[int]] = {}
        for i, s in enumerate(self.states):
            members.setdefault(s.model, []).append(i)
        models = sorted(members)
        self.pools: dict[str, tuple[int, ...]] = {m: tuple(members[m]) for m in models}
        pool_number = {m: p for p, m in enumerate(models)}
        self.pool_of: list[int] = [pool_number[s.model] for s in self.states]
        self.pool_in_flight: list[int] = [
            sum(self.states[i].in_flight for i in members[m]) for m in models
        ]
        self.rings: dict[str, HashRing] = {
            m: HashRing([(i, self.states[i].id) for i in members[m]], virtual_nodes) for m in models
        }
        self.tables: list[PrefillTable] = [
            prefill_table(s.accelerator, s.model, s.tp) for s in self.states
        ]

    def __len__(self) -> int:
        return len(self.states)
