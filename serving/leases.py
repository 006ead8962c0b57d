"""Leases: a routed request's hold on the in-flight budget, until its outcome is reported or
its predicted completion has long passed.

A router that never reports an outcome must not hold capacity for long, and one that reports
late must not lose a request still running. A lease therefore lives ``margin`` × the request's
predicted completion time, ``predicted TTFT + max output tokens × TPOT`` (the replica's TPOT as
the router observed it, or the roofline prediction before it has observed any), kept between
``floor_s`` (network and client delays dominate short requests) and ``ceiling_s``.

Leases expire in order of their own expiry times (a heap; a lease reported before it expires
leaves a stale heap entry, dropped when it reaches the top or when stale entries outnumber the
live ones).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from placement.errors import InputError
from serving.route.types import RouteQuery

DEFAULT_LEASE_MARGIN = 2.0
DEFAULT_LEASE_FLOOR_S = 10.0
DEFAULT_LEASE_CEILING_S = 300.0
_COMPACT_MIN = 1024  # heaps smaller than this are never compacted


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTerms:
    """How long an unreported request holds its place (see the module docstring)."""

    margin: float = DEFAULT_LEASE_MARGIN
    floor_s: float = DEFAULT_LEASE_FLOOR_S
    ceiling_s: float = DEFAULT_LEASE_CEILING_S

    def __post_init__(self) -> None:
        if not self.margin >= 1:
            raise InputError(f"{self.margin}", field="lease_margin", expected="≥ 1")
        if not self.floor_s >= 0:
            raise InputError(f"{self.floor_s}", field="lease_floor_s", expected="≥ 0")
        if not self.ceiling_s > 0:
            raise InputError(f"{self.ceiling_s}", field="lease_s", expected="> 0")

    def lifetime_s(self, predicted_ttft_s: float, output_tokens: int, tpot_s: float) -> float:
        """Seconds a lease lives: margin × predicted completion, within [floor, ceiling]."""
        # conditional expressions, not min()/max() (several times dearer): once per decision
        completion = predicted_ttft_s if predicted_ttft_s > 0.0 else 0.0
        if output_tokens > 0 and tpot_s > 0.0:
            completion += output_tokens * tpot_s
        lifetime = self.margin * completion
        lifetime = self.floor_s if lifetime < self.floor_s else lifetime
        return self.ceiling_s if lifetime > self.ceiling_s else lifetime


@dataclass(slots=True)
class Lease:
    query: RouteQuery
    replica_id: str
    expires_at: float
    first_token: bool = False
    routed_by: str | None = None  # the API key's name that asked (who may report the outcome)
    routed_at: float = 0.0  # the service clock when it was routed


class LeaseBook:
    """Leases by decision id, expiring in order of their expiry times."""

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}
        self._expiry: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._leases)

    def __contains__(self, decision_id: object) -> bool:
        return decision_id in self._leases

    def get(self, decision_id: str) -> Lease | None:
        return self._leases.get(decision_id)

    def add(self, decision_id: str, lease: Lease) -> None:
        self._leases[decision_id] = lease
        heapq.heappush(self._expiry, (lease.expires_at, decision_id))

    def pop(self, decision_id: str) -> Lease | None:
        """Remove a lease (its outcome arrived); its heap entry goes stale."""
        lease = self._leases.pop(decision_id, None)
        if lease is not None and len(self._expiry) > max(_COMPACT_MIN, 2 * len(self._leases)):
            self._expiry = [(x.expires_at, d) for d, x in self._leases.items()]
            heapq.heapify(self._expiry)
        return lease

    def due(self, now: float) -> bool:
        """Whether a lease (perhaps a stale entry) is due by ``now``: one comparison, so a
        decision pays for the sweep only when there is something to sweep."""
        return bool(self._expiry) and self._expiry[0][0] <= now

    def expired(self, now: float, limit: int) -> list[Lease]:
        """Remove and return up to ``limit`` leases whose expiry is at or before ``now``,
        soonest first (a list, not a generator: this runs on most decisions)."""
        heap, leases = self._expiry, self._leases
        taken: list[Lease] = []
        pop = heapq.heappop
        while heap and heap[0][0] <= now and len(taken) < limit:
            lease = leases.pop(pop(heap)[1], None)
            if lease is not None:
                taken.append(lease)
        return taken

    def next_expiry(self) -> float | None:
        """When the soonest live lease expires (None when there is none)."""
        heap, leases = self._expiry, self._leases
        while heap and heap[0][1] not in leases:
            heapq.heappop(heap)
        return heap[0][0] if heap else None
