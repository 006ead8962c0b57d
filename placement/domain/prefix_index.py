"""What a router sent where: per replica, an LRU of the prefix blocks it routed there.

Routers that want prefix affinity but get no cache events from the engines (SGLang's router,
the llm-d/GIE approximate prefix scorer, Dynamo without KV events, Preble's global tree) all
keep the same thing: a record of the prefix blocks of the requests they sent to each replica,
bounded like the replica's own cache. :class:`ReplicaPrefixCache` is that record for one
replica; :class:`PrefixIndex` holds one per replica plus an inverted index (block hash →
replicas holding it) so a request is matched against the whole fleet in one walk.

Prefix closure. A chain is touched deepest block first and root last, so a block is never
more recently used than its parent; LRU therefore evicts leaves before their ancestors (as a
radix tree does), every cache stays prefix-closed, and the longest cached prefix of a request
is simply the count of its leading block hashes present.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Generic, Protocol, TypeVar


class IndexedReplica(Protocol):
    """What the index needs of a replica: its position in the fleet and its KV capacity."""

    @property
    def index(self) -> int: ...

    @property
    def kv_capacity_tokens(self) -> int: ...


R = TypeVar("R", bound=IndexedReplica)


#: A block's bookkeeping: (last touch time in seconds, touches since it last went cold).
BlockStats = tuple[float, int]


class _LruHead:
    """The first blocks of an LRU order as (touch times, running touch counts), read lazily
    from a live iterator; valid only until the cache it reads is modified."""

    __slots__ = ("_rest", "lasts", "running")

    def __init__(self, rest: Iterator[BlockStats]) -> None:
        self._rest = rest
        self.lasts: list[float] = []
        self.running = [0]

    def extend_to(self, k: int) -> tuple[list[float], list[int]]:
        lasts, running = self.lasts, self.running
        if len(lasts) < k:
            total = running[-1]
            for last, hits in islice(self._rest, k - len(lasts)):
                lasts.append(last)
                total += hits
                running.append(total)
        return lasts, running


class ReplicaPrefixCache:
    """LRU of prefix block hashes routed to one replica.

    ``capacity_blocks`` bounds the number of blocks kept (least recently touched go first).
    ``hit_window_s`` is the window of the per-block touch count: a touch after a gap longer
    than the window restarts the count at 1 (Preble weighs evictions by recent hits).
    Every call is O(number of hashes given) dict operations, plus evictions.
    """

    __slots__ = ("_blocks", "_snapshot", "capacity_blocks", "hit_window_s")

    def __init__(self, capacity_blocks: int, *, hit_window_s: float = math.inf) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be >= 1, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self.hit_window_s = hit_window_s
        self._blocks: OrderedDict[int, BlockStats] = OrderedDict()  # oldest first
        self._snapshot: _LruHead | None = None  # memo of the LRU head; None when stale

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_hash: object) -> bool:
        return block_hash in self._blocks

    def match(self, block_hashes: Sequence[int]) -> int:
        """Length in blocks of the longest prefix of ``block_hashes`` held here (no touch)."""
        blocks = self._blocks
        n = 0
        for h in block_hashes:
            if h not in blocks:
                break
            n += 1
        return n

    def insert(self, block_hashes: Sequence[int], now: float = 0.0) -> list[int]:
        """Record a request's chain as just used; returns the hashes evicted to make room."""
        return self.record(block_hashes, now)[1]

    def record(self, block_hashes: Sequence[int], now: float = 0.0) -> tuple[list[int], list[int]]:
        """:meth:`insert`, returning also the hashes that were not held before: an index of
        holders needs to touch only those (a held block is already indexed here)."""
        blocks = self._blocks
        window = self.hit_window_s
        self._snapshot = None
        added: list[int] = []
        for h in reversed(block_hashes):  # deepest first, root last: keeps prefix closure
            stats = blocks.get(h)
            if stats is None:
                blocks[h] = (now, 1)
                added.append(h)
            else:
                last, hits = stats
                blocks[h] = (now, hits + 1 if now - last <= window else 1)
                blocks.move_to_end(h)
        evicted: list[int] = []
        while len(blocks) > self.capacity_blocks:
            evicted.append(blocks.popitem(last=False)[0])
        return added, evicted

    def last_touch(self, block_hash: int) -> float | None:
        """When a block was last touched, or None if it is not held."""
        stats = self._blocks.get(block_hash)
        return None if stats is None else stats[0]

    def discard(self, block_hash: int) -> None:
        """Forget one block (TTL expiry); a no-op if it is not held."""
        if self._blocks.pop(block_hash, None) is not None:
            self._snapshot = None

    def recent_hits_of_coldest(self, k: int, since: float) -> int:
        """Touch counts summed over the ``k`` least recently used blocks (LRU's next ``k``
        victims), counting only blocks last touched at or after ``since``.

        Reads a memo of the LRU order's head (touch times, running touch counts), extended
        on demand and dropped when the cache changes: O(k) after a change, then O(log k).
        Touch times are non-decreasing along the LRU order when calls come in time order.
        """
        if k <= 0:
            return 0
        snap = self._snapshot
        if snap is None:
            snap = self._snapshot = _LruHead(iter(self._blocks.values()))
        lasts, running = snap.extend_to(k)
        k = min(k, len(lasts))
        cold = min(bisect.bisect_left(lasts, since, 0, k), k)  # victims touched before since
        return running[k] - running[cold]

    def coldest(self) -> Iterator[tuple[int, BlockStats]]:
        """Blocks from least to most recently used, i.e. in the order LRU would evict them."""
        return iter(self._blocks.items())


K = TypeVar("K", bound=Hashable)


def deepest_matches(
    holders: Mapping[int, Collection[K]], block_hashes: Sequence[int]
) -> dict[K, int]:
    """Longest prefix of ``block_hashes``, in blocks, per holder with at least its first block,
    from an inverted index (block hash → who holds it): one walk down the chain, intersecting
    the holder sets level by level."""
    out: dict[K, int] = {}
    if not block_hashes:
        return out
    first = holders.get(block_hashes[0])
    if not first:
        return out
    alive = set(first)
    depth = 1
    for h in block_hashes[1:]:
        level = holders.get(h)
        deeper = alive.intersection(level) if level else set()
        if len(deeper) < len(alive):
            for key in alive - deeper:
                out[key] = depth
        alive = deeper
        if not alive:
            return out
        depth += 1
    for key in alive:
        out[key] = depth
    return out


class PrefixIndex(Generic[R]):
    """One :class:`ReplicaPrefixCache` per replica (keyed by ``IndexedReplica.index``).

    ``capacity_blocks`` gives a replica's capacity the first time it is seen, e.g. its KV
    capacity in tokens divided by the prefix block size. ``ttl_s``, when set, forgets blocks
    not touched for that long (Dynamo's no-events mode); expiry reads a log of touches in time
    order, so it costs O(1) amortised per touch however many replicas there are.
    """

    def __init__(
        self,
        capacity_blocks: Callable[[R], int],
        *,
        ttl_s: float | None = None,
        hit_window_s: float = math.inf,
    ) -> None:
        self._capacity_blocks = capacity_blocks
        self._ttl_s = ttl_s
        self._hit_window_s = hit_window_s
        self._caches: dict[int, ReplicaPrefixCache] = {}
        self._holders: dict[int, set[int]] = {}  # block hash -> replica indices holding it
        self._touches: deque[tuple[float, int, int]] = deque()  # (time, replica, hash), TTL only

    def cache(self, replica_index: int) -> ReplicaPrefixCache | None:
        """The cache of one replica, or None if nothing was ever sent there."""
        return self._caches.get(replica_index)

    def size(self, replica_index: int) -> int:
        """Blocks currently recorded for a replica (0 if none)."""
        c = self._caches.get(replica_index)
        return 0 if c is None else len(c)

    def match(self, replica_index: int, block_hashes: Sequence[int], now: float = 0.0) -> int:
        """Longest prefix of ``block_hashes``, in blocks, recorded for one replica."""
        self._expire(now)
        c = self._caches.get(replica_index)
        return 0 if c is None else c.match(block_hashes)

    def match_all(self, block_hashes: Sequence[int], now: float = 0.0) -> dict[int, int]:
        """Longest recorded prefix per replica, for replicas with at least one block matched.

        One walk down the chain, intersecting the holder sets level by level.
        """
        self._expire(now)
        return deepest_matches(self._holders, block_hashes)

    def insert(self, replica: R, block_hashes: Sequence[int], now: float = 0.0) -> None:
        """Record that a request with this chain was sent to ``replica`` at ``now``."""
        if not block_hashes:
            return
        idx = replica.index
        c = self._caches.get(idx)
        if c is None:
            c = ReplicaPrefixCache(
                max(1, self._capacity_blocks(replica)), hit_window_s=self._hit_window_s
            )
            self._caches[idx] = c
        self._expire(now)
        if self._ttl_s is not None:
            self._touches.extend((now, idx, h) for h in block_hashes)
        added, evicted = c.record(block_hashes, now)
        all_holders = self._holders
        for h in added:
            holders = all_holders.get(h)
            if holders is None:
                all_holders[h] = {idx}
            else:
                holders.add(idx)
        if evicted:
            self._forget(idx, evicted)

    def _expire(self, now: float) -> None:
        if self._ttl_s is None:
            return
        horizon = now - self._ttl_s
        touches = self._touches
        while touches and touches[0][0] < horizon:
            _, idx, h = touches.popleft()
            c = self._caches[idx]
            last = c.last_touch(h)
            if last is not None and last < horizon:  # not touched again since this entry
                c.discard(h)
                self._forget(idx, [h])

    def _forget(self, replica_index: int, hashes: list[int]) -> None:
        for h in hashes:
            holders = self._holders.get(h)
            if holders is not None:
                holders.discard(replica_index)
                if not holders:
                    del self._holders[h]


def kv_capacity_blocks(block_tokens: int) -> Callable[[IndexedReplica], int]:
    """Capacity rule: a replica's KV capacity in tokens over the prefix block size."""

    def capacity(replica: IndexedReplica) -> int:
        return max(1, replica.kv_capacity_tokens // block_tokens)

    return capacity
