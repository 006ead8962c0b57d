"""Dynamic batching: requests for the same backend go to it together, where batching pays.

A backend that runs each request as one batch through its model (an embedding or
classification server) pays a fixed cost per batch, so many requests sent as one cost little
more than one. The :class:`Batcher` groups requests by a key (the gateway's: the replica, the
model and the answer's format) and sends a group as one call when

- the backend has room: fewer than ``in_flight`` of this key's batches are out (an idle
  backend gets a request at once, alone: batching adds no wait when nothing is queued);
- the group holds ``max_items`` items (a request that would push it over sends the group
  first and starts the next one);
- its most urgent request's **wait budget** is spent: ``min(max_wait_s, wait_share × SLO)``
  after it arrived (:meth:`BatchPolicy.wait_budget`), whether or not the backend has room.

When a batch returns, the group that gathered meanwhile goes at once. The budget is the bound,
not the pace: under load a group goes when its backend frees, and a budget shorter than one
batch's time would send groups to a busy backend early and small, where they only queue (on
the emulated replica, a 50 ms cap held throughput at 80 req/s to 55 answers/s against ~80
with the default; ``bench/RESULTS.md``). ``send`` turns one group
(the members' payloads, in order) into one result per member, or raises, which fails every
member. A member whose caller stopped waiting is left out of its batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from placement.errors import InputError

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")
R = TypeVar("R")

DEFAULT_MAX_ITEMS = 64
DEFAULT_WAIT_SHARE = 0.25
DEFAULT_MAX_WAIT_S = 0.5
DEFAULT_IN_FLIGHT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchPolicy:
    """When a group goes (see the module's docstring); ``max_items`` 0 turns batching off."""

    max_items: int = DEFAULT_MAX_ITEMS
    wait_share: float = DEFAULT_WAIT_SHARE
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    in_flight: int = DEFAULT_IN_FLIGHT

    def __post_init__(self) -> None:
        if self.max_items < 0:
            raise InputError("must be ≥ 0", field="max_items")
        if not 0 <= self.wait_share <= 1:
            raise InputError("must be within [0, 1]", field="wait_share")
        if not self.max_wait_s >= 0:
            raise InputError("must be ≥ 0", field="max_wait_s")
        if self.in_flight < 1:
            raise InputError("must be ≥ 1", field="in_flight")

    @property
    def enabled(self) -> bool:
        return self.max_items > 0

    def wait_budget(self, slo_s: float) -> float:
        """How long a request with this latency SLO may wait to be batched."""
        return min(self.max_wait_s, self.wait_share * max(0.0, slo_s))


@dataclass(slots=True, eq=False)
class _Member(Generic[P, R]):
    payload: P
    size: int
    due: float  # loop time by which its group must go
    future: asyncio.Future[R]


@dataclass(slots=True)
class _Group(Generic[P, R]):
    members: list[_Member[P, R]] = field(default_factory=list)
    size: int = 0
    timer: asyncio.TimerHandle | None = None
    due: float = float("inf")


class Batcher(Generic[K, P, R]):
    """Groups by key and sends each group with ``send`` (create it on the running loop)."""

    def __init__(
        self,
        policy: BatchPolicy,
        send: Callable[[K, Sequence[P]], Awaitable[Sequence[R]]],
        *,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> None:
        """``on_batch(requests, items)`` is told the size of each batch sent."""
        self.policy = policy
        self._send = send
        self._on_batch = on_batch
        self._groups: dict[K, _Group[P, R]] = {}
        self._in_flight: dict[K, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def in_flight(self, key: K) -> int:
        return self._in_flight.get(key, 0)

    def waiting(self, key: K) -> int:
        group = self._groups.get(key)
        return len(group.members) if group is not None else 0

    async def submit(self, key: K, payload: P, *, size: int, wait_s: float) -> R:
        """Send ``payload`` (``size`` items) in a batch of ``key``, waiting at most
        ``wait_s`` for others to join it; its share of the batch's result."""
        loop = asyncio.get_running_loop()
        member: _Member[P, R] = _Member(payload, size, loop.time() + wait_s, loop.create_future())
        self._add(key, member)
        return await member.future

    def _add(self, key: K, member: _Member[P, R]) -> None:
        policy = self.policy
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
        if group.members and group.size + member.size > policy.max_items:
            self._flush(key)  # it would go over: what gathered goes first
            group = self._groups[key] = _Group()
        group.members.append(member)
        group.size += member.size
        loop = asyncio.get_running_loop()
        if (
            group.size >= policy.max_items
            or self.in_flight(key) < policy.in_flight
            or member.due <= loop.time()
        ):
            self._flush(key)
        elif member.due < group.due:
            group.due = member.due
            if group.timer is not None:
                group.timer.cancel()
            group.timer = loop.call_at(member.due, self._flush, key)

    def _flush(self, key: K) -> None:
        group = self._groups.pop(key, None)
        if group is None:
            return
        if group.timer is not None:
            group.timer.cancel()
        members = [m for m in group.members if not m.future.done()]
        if not members:
            return
        self._in_flight[key] = self.in_flight(key) + 1
        if self._on_batch is not None:
            self._on_batch(len(members), sum(m.size for m in members))
        task = asyncio.get_running_loop().create_task(self._run(key, members))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: K, members: list[_Member[P, R]]) -> None:
        try:
            results = await self._send(key, [m.payload for m in members])
            if len(results) != len(members):
                raise RuntimeError(f"{len(results)} results for a batch of {len(members)}")
        except Exception as exc:
            for m in members:
                if not m.future.done():
                    m.future.set_exception(exc)
        else:
            for m, result in zip(members, results, strict=True):
                if not m.future.done():
                    m.future.set_result(result)
        finally:
            left = self.in_flight(key) - 1
            if left:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)
            if key in self._groups:  # what gathered while this batch was out goes now
                self._flush(key)

    async def close(self) -> None:
        """Fail what waits; wait for the batches out."""
        for key in list(self._groups):
            group = self._groups.pop(key)
            if group.timer is not None:
                group.timer.cancel()
            for m in group.members:
                if not m.future.done():
                    m.future.set_exception(asyncio.CancelledError())
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
