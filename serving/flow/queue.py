"""Flow control: requests that cannot be placed now wait, in order, until they can or must not.

A pure object (no clock, no I/O, no asyncio) so the gateway and the simulator run the very same
queue. A request the fleet cannot take at once is *offered* here instead of being refused:

- **bands** by priority (0 the highest); a lower band is served only when every higher band is
  empty or its head cannot be placed either (the caller stops at the first band that fails);
- within a band, **per-tenant queues**; the next tenant served is the one furthest under its
  credit share: a Virtual Token Counter per band (Sheng et al., 2024) charged, at dispatch,
  the request's cost (the caller's price — the gateway's is GPU-seconds,
  :mod:`serving.admission.cost` — else prompt tokens + ``decode_weight`` × its output
  allowance) divided by the tenant's credit weight; a tenant that starts waiting again is
  lifted to the lowest counter among the waiting tenants, so idling banks nothing;
- within a tenant, **earliest deadline first**: each request's TTFT deadline (arrival + its TTFT
  SLO × ``deadline_slack``) less the time it needs once dispatched (its predicted prefill,
  over its band's headroom below the top band), i.e. the latest moment its dispatch still
  meets the SLO as the admission will judge it;
- a request whose latest dispatch moment has passed is **expired** (the caller answers 429 with
  a Retry-After and counts a deadline miss); one that cannot meet its deadline even now is
  refused at the door, as is one whose tenant already holds its **share** of the queue
  (``max(floor, credit share) × max_queued``) or one arriving at a full queue;
- a waiting request can be **removed** at once (its client went away);
- what it is dispatched with is the time it has left (:meth:`FlowPolicy.ttft_budget`): the
  admission that places it judges its forecast TTFT against that, not against the full SLO —
  and, below the top band, against ``band_headroom`` of it, so lower bands leave room.

Orders other than the default (``fair``) exist to be compared: ``edf`` (earliest dispatch
deadline in the band, tenants ignored), ``fifo`` (arrival order in the band), ``lifo`` (the
newest first: under sustained overload the served ones still have their time) and ``sjf`` (the
cheapest request in the band first, by its cost, tenants ignored: under overload it finishes
more requests per second, and a long prompt's wait is still bounded by its deadline).

**Backfill** (``backfill`` = K > 0, off by default): when a band's next request cannot be
placed (a long prompt no replica can start in time, or one whose time left is too short for
the forecast), the K requests behind it in the band's order are offered too, and a new arrival
of the band may be placed at once while others of its band wait (never while a higher band
waits). The blocked head keeps its place; lower bands still do not overtake a band that waits.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from placement.errors import InputError

T = TypeVar("T")

Order = Literal["fair", "edf", "fifo", "sjf", "lifo"]
ORDERS: tuple[Order, ...] = ("fair", "edf", "fifo", "sjf", "lifo")
DEFAULT_MAX_QUEUED = 4096
DEFAULT_TENANT_FLOOR = 0.05  # any tenant may hold this share of the queue
DEFAULT_DECODE_WEIGHT = 2.0
MAX_RETRY_AFTER_S = 60
STALE_SLACK = 64  # entries that left a tenant's heap from inside it, kept before compacting

# the states of a waiting request
WAITING, DISPATCHED, REMOVED, EXPIRED = "waiting", "dispatched", "removed", "expired"


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowPolicy:
    """How the queue orders, bounds and times out what waits."""

    order: Order = "fair"
    max_queued: int = DEFAULT_MAX_QUEUED
    deadline_slack: float = 1.0  # × the TTFT SLO: how long past arrival the first token may come
    tenant_floor: float = DEFAULT_TENANT_FLOOR
    credit_shares: Mapping[str, float] = field(default_factory=dict)
    decode_weight: float = DEFAULT_DECODE_WEIGHT
    # a request of a band below the top may be dispatched only when forecast to take at most
    # this share of the time it has left: lower bands leave room for the top one
    band_headroom: float = 1.0
    # when a band's next request cannot be placed, how many requests behind it in the band
    # are offered before the band stops (0: none, the band waits for its head)
    backfill: int = 0

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise InputError(
                f"unknown queue order {self.order!r}", field="order", expected=", ".join(ORDERS)
            )
        if self.max_queued < 0:
            raise InputError("must be ≥ 0", field="max_queued")
        if not self.deadline_slack > 0:
            raise InputError("must be > 0", field="deadline_slack")
        if not 0 <= self.tenant_floor <= 1:
            raise InputError("must be within [0, 1]", field="tenant_floor")
        if not 0 < self.band_headroom <= 1:
            raise InputError("must be within (0, 1]", field="band_headroom")
        if self.backfill < 0:
            raise InputError("must be ≥ 0", field="backfill")

    def ttft_budget(self, band: int, deadline: float, now: float) -> float:
        """The time a request of ``band`` due at ``deadline`` may be forecast to take if
        dispatched at ``now``."""
        return max(0.0, deadline - now) * self.headroom(band)

    def headroom(self, band: int) -> float:
        """The share of its time left a request of ``band`` may be forecast to take: all of it
        in the top band, ``band_headroom`` below."""
        return 1.0 if band == 0 else self.band_headroom

    def share(self, tenant: str, credit_share: float) -> int:
        """How many requests a tenant with ``credit_share`` may have waiting (at least one)."""
        return max(1, math.ceil(max(self.tenant_floor, credit_share) * self.max_queued))


@dataclass(slots=True, eq=False, kw_only=True)
class Waiting(Generic[T]):
    """One request in the queue, with what the caller needs back (``payload``)."""

    tenant: str
    band: int
    arrival: float
    deadline: float  # when its first token is due
    service_s: float  # time from dispatch to its first token (predicted)
    cost: float  # what its tenant is charged at dispatch (credit units)
    payload: T
    # the share of its time left it may be forecast to take when dispatched (its band's
    # headroom: 1 for the top band)
    headroom: float = 1.0
    seq: int = 0
    state: str = WAITING

    @property
    def latest_start(self) -> float:
        """The latest dispatch that still meets the deadline within its band's headroom: at
        ``t`` it is allowed ``headroom × (deadline − t)``, and it needs ``service_s``."""
        return self.deadline - self.service_s / self.headroom


@dataclass(frozen=True, slots=True)
class Offer:
    """Queued, or refused with a reason (``deadline``, ``queue_share``, ``queue_full``) and how
    long to wait before retrying."""

    queued: bool
    reason: str = "queued"
    retry_after_s: int = 0


class _Band(Generic[T]):
    __slots__ = ("counters", "number", "tenants")

    def __init__(self, number: int) -> None:
        self.number = number
        self.tenants: dict[str, list[tuple[float, int, Waiting[T]]]] = {}
        self.counters: dict[str, float] = {}  # virtual token counter per tenant


class FlowQueue(Generic[T]):
    """Bands of per-tenant queues; see the module's docstring."""

    def __init__(
        self,
        policy: FlowPolicy | None = None,
        *,
        credit_share: Callable[[str], float] | None = None,
    ) -> None:
        """``credit_share``: a tenant's share as it stands (None: the policy's
        ``credit_shares``), read whenever it is needed so a change takes effect at once."""
        self.policy = policy or FlowPolicy()
        self.credit_share = credit_share or (lambda t: self.policy.credit_shares.get(t, 0.0))
        self._bands: dict[int, _Band[T]] = {}
        self._deadlines: list[tuple[float, int, Waiting[T]]] = []  # every waiting request
        self._seq = itertools.count(1)
        self._per_tenant: dict[str, int] = {}
        self.lengths: dict[tuple[str, int], int] = {}  # (tenant, band) → waiting
        self.waiting = 0
        self._dispatch_rate = 0.0  # dispatches per second (moving average), for Retry-After
        self._last_dispatch: float | None = None

    # ---- in ------------------------------------------------------------------------------
    def make(
        self,
        payload: T,
        *,
        tenant: str,
        band: int,
        arrival: float,
        ttft_slo_s: float,
        service_s: float = 0.0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float | None = None,
    ) -> Waiting[T]:
        """A waiting request with its deadline from the policy, charged ``cost`` at dispatch
        (None: its weighted tokens)."""
        p = self.policy
        if cost is None:
            cost = input_tokens + p.decode_weight * output_tokens
        return Waiting(
            tenant=tenant,
            band=band,
            arrival=arrival,
            deadline=arrival + ttft_slo_s * p.deadline_slack,
            service_s=max(0.0, service_s),
            cost=cost,
            payload=payload,
            headroom=p.headroom(band),
        )

    def offer(self, item: Waiting[T], now: float) -> Offer:
        """Queue ``item``, or refuse it (it is then not in the queue)."""
        if item.latest_start < now:
            return Offer(False, "deadline", self.retry_after_s(item.band))
        share = self.policy.share(item.tenant, self.credit_share(item.tenant))
        if self._per_tenant.get(item.tenant, 0) >= share:
            return Offer(False, "queue_share", self.retry_after_s(item.band))
        if self.waiting >= self.policy.max_queued:
            return Offer(False, "queue_full", self.retry_after_s(item.band))
        item.seq = next(self._seq)
        item.state = WAITING
        band = self._bands.get(item.band)
        if band is None:
            band = self._bands[item.band] = _Band(item.band)
            self._bands = dict(sorted(self._bands.items()))
        queue = band.tenants.get(item.tenant)
        if queue is None:
            queue = band.tenants[item.tenant] = []
        lengths = self.lengths
        if (item.tenant, item.band) not in lengths:  # (re)joining: no credit banked while away
            floor = min(
                (c for t, c in band.counters.items() if (t, item.band) in lengths),
                default=None,
            )
            own = band.counters.get(item.tenant, 0.0)
            band.counters[item.tenant] = own if floor is None else max(own, floor)
        order = self.policy.order
        key = (
            item.arrival
            if order == "fifo"
            else -item.arrival
            if order == "lifo"
            else item.cost
            if order == "sjf"
            else item.latest_start
        )
        heapq.heappush(queue, (key, item.seq, item))
        heapq.heappush(self._deadlines, (item.latest_start, item.seq, item))
        self._count(item, +1)
        return Offer(True)

    # ---- out -----------------------------------------------------------------------------
    def candidates(self) -> Iterator[Waiting[T]]:
        """The next request of each band, highest band first, each one until the caller
        :meth:`dispatched` it (then the band's next). A caller that could not place a
        candidate asks for the next one: without backfill there is none (lower bands do not
        overtake a band whose head waits); with ``backfill`` = K, the K requests behind the
        head in the band's order are offered too (each one the caller places leaves the
        queue), and then none."""
        for number in list(self._bands):
            band = self._bands[number]
            while True:
                item = self._next(band)
                if item is None:
                    break
                yield item
                if item.state == WAITING:  # not taken: its band backfills, then stops
                    yield from self._behind(band, item, self.policy.backfill)
                    return

    def _behind(self, band: _Band[T], head: Waiting[T], count: int) -> list[Waiting[T]]:
        """Up to ``count`` waiting requests of ``band`` after ``head``, in the band's order."""
        if count <= 0:
            return []
        fair = self.policy.order == "fair"
        ranked: list[tuple[float, float, int, Waiting[T]]] = []
        for tenant, queue in band.tenants.items():
            counter = band.counters.get(tenant, 0.0) if fair else 0.0
            ranked += (
                (counter, key, seq, item)
                for key, seq, item in heapq.nsmallest(
                    count, (e for e in queue if e[2].state == WAITING and e[2] is not head)
                )
            )
        return [entry[3] for entry in heapq.nsmallest(count, ranked)]

    def _next(self, band: _Band[T]) -> Waiting[T] | None:
        best: tuple[float, float, int] | None = None
        chosen: Waiting[T] | None = None
        order = self.policy.order
        for tenant, queue in band.tenants.items():
            while queue and queue[0][2].state != WAITING:
                heapq.heappop(queue)
            if len(queue) > 2 * self.lengths.get((tenant, band.number), 0) + STALE_SLACK:
                # requests that left from inside the heap (backfilled, removed, expired behind
                # newer ones under lifo) are dropped once they outnumber the waiting
                queue[:] = [e for e in queue if e[2].state == WAITING]
                heapq.heapify(queue)
            if not queue:
                continue
            key, seq, item = queue[0]
            rank = (band.counters.get(tenant, 0.0) if order == "fair" else 0.0, key, seq)
            if best is None or rank < best:
                best, chosen = rank, item
        return chosen

    def dispatched(self, item: Waiting[T], now: float) -> None:
        """``item`` was placed: out of the queue, its tenant charged."""
        if item.state != WAITING:
            return
        item.state = DISPATCHED
        self._count(item, -1)
        band = self._bands[item.band]
        weight = self.credit_share(item.tenant) or self.policy.tenant_floor
        band.counters[item.tenant] = band.counters.get(item.tenant, 0.0) + item.cost / max(
            weight, 1e-9
        )
        if self._last_dispatch is not None:
            gap = max(now - self._last_dispatch, 1e-3)
            self._dispatch_rate = 0.9 * self._dispatch_rate + 0.1 / gap
        self._last_dispatch = now

    def remove(self, item: Waiting[T]) -> bool:
        """Take ``item`` out (its client went away); False if it was no longer waiting."""
        if item.state != WAITING:
            return False
        item.state = REMOVED
        self._count(item, -1)
        return True

    def expire(self, now: float) -> list[Waiting[T]]:
        """Take out and return every request whose latest dispatch moment has passed."""
        out: list[Waiting[T]] = []
        heap = self._deadlines
        while heap and (heap[0][2].state != WAITING or heap[0][0] < now):
            _, _, item = heapq.heappop(heap)
            if item.state == WAITING:
                item.state = EXPIRED
                self._count(item, -1)
                out.append(item)
        return out

    def next_expiry(self) -> float | None:
        """The earliest latest-dispatch moment among the waiting (None: nothing waits)."""
        heap = self._deadlines
        while heap and heap[0][2].state != WAITING:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    # ---- accounting ----------------------------------------------------------------------
    def may_place_at_once(self, band: int) -> bool:
        """Whether a new request of ``band`` may be placed without queueing: nothing waits in
        a higher band, nor in its own (with backfill, a request of its band waiting does not
        hold it back: the head could not be placed when last tried)."""
        return self.waiting_above(band if self.policy.backfill else band + 1) == 0

    def waiting_above(self, band: int) -> int:
        """Requests waiting in bands of higher priority than ``band``."""
        return sum(n for (_, b), n in self.lengths.items() if b < band)

    def retry_after_s(self, band: int) -> int:
        """Seconds a refused request should wait: the work queued at or above its band at the
        recent dispatch rate (1 to 60 s)."""
        ahead = self.waiting_above(band + 1)
        if ahead == 0 or self._dispatch_rate <= 0:
            return 1
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(ahead / self._dispatch_rate)))

    def _count(self, item: Waiting[T], delta: int) -> None:
        self.waiting += delta
        self._per_tenant[item.tenant] = self._per_tenant.get(item.tenant, 0) + delta
        key = (item.tenant, item.band)
        self.lengths[key] = self.lengths.get(key, 0) + delta
        if self._per_tenant[item.tenant] == 0:
            del self._per_tenant[item.tenant]
        if self.lengths[key] == 0:
            del self.lengths[key]
