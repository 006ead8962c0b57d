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

import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

from placement.routing.base import ReplicaView

#: A block's bookkeeping: (last touch time in seconds, touches since it last went cold).
BlockStats = tuple[float, int]


class ReplicaPrefixCache:
    """LRU of prefix block hashes routed to one replica.

    ``capacity_blocks`` bounds the number of blocks kept (least recently touched go first).
    ``ttl_s``, when set, forgets blocks not touched for that long (Dynamo's no-events mode).
    ``hit_window_s`` is the window of the per-block touch count: a touch after a gap longer
    than the window restarts the count at 1 (Preble weighs evictions by recent hits).
    Every call is O(number of hashes given) dict operations, plus evictions.
    """

    __slots__ = ("_blocks", "capacity_blocks", "hit_window_s", "ttl_s")

    def __init__(
        self,
        capacity_blocks: int,
        *,
        ttl_s: float | None = None,
        hit_window_s: float = math.inf,
    ) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be >= 1, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self.ttl_s = ttl_s
        self.hit_window_s = hit_window_s
        self._blocks: OrderedDict[int, BlockStats] = OrderedDict()  # oldest first

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
        blocks = self._blocks
        window = self.hit_window_s
        for h in reversed(block_hashes):  # deepest first, root last: keeps prefix closure
            stats = blocks.get(h)
            if stats is None:
                blocks[h] = (now, 1)
            else:
                last, hits = stats
                blocks[h] = (now, hits + 1 if now - last <= window else 1)
                blocks.move_to_end(h)
        evicted: list[int] = []
        while len(blocks) > self.capacity_blocks:
            evicted.append(blocks.popitem(last=False)[0])
        return evicted

    def expire(self, now: float) -> list[int]:
        """Forget blocks older than the TTL (no-op without one); returns the hashes dropped."""
        if self.ttl_s is None or not self._blocks:
            return []
        horizon = now - self.ttl_s
        blocks = self._blocks
        dropped: list[int] = []
        while blocks:
            h, (last, _) = next(iter(blocks.items()))
            if last >= horizon:
                break
            blocks.popitem(last=False)
            dropped.append(h)
        return dropped

    def coldest(self) -> Iterator[tuple[int, BlockStats]]:
        """Blocks from least to most recently used, i.e. in the order LRU would evict them."""
        return iter(self._blocks.items())


class PrefixIndex:
    """One :class:`ReplicaPrefixCache` per replica (keyed by ``ReplicaView.index``).

    ``capacity_blocks`` gives a replica's capacity the first time it is seen, e.g. its KV
    capacity in tokens divided by the prefix block size.
    """

    def __init__(
        self,
        capacity_blocks: Callable[[ReplicaView], int],
        *,
        ttl_s: float | None = None,
        hit_window_s: float = math.inf,
    ) -> None:
        self._capacity_blocks = capacity_blocks
        self._ttl_s = ttl_s
        self._hit_window_s = hit_window_s
        self._caches: dict[int, ReplicaPrefixCache] = {}
        self._holders: dict[int, set[int]] = {}  # block hash -> replica indices holding it

    def cache(self, replica_index: int) -> ReplicaPrefixCache | None:
        """The cache of one replica, or None if nothing was ever sent there."""
        return self._caches.get(replica_index)

    def size(self, replica_index: int) -> int:
        """Blocks currently recorded for a replica (0 if none)."""
        c = self._caches.get(replica_index)
        return 0 if c is None else len(c)

    def match(self, replica_index: int, block_hashes: Sequence[int], now: float = 0.0) -> int:
        """Longest prefix of ``block_hashes``, in blocks, recorded for one replica."""
        c = self._caches.get(replica_index)
        if c is None:
            return 0
        self._forget(replica_index, c.expire(now))
        return c.match(block_hashes)

    def match_all(self, block_hashes: Sequence[int], now: float = 0.0) -> dict[int, int]:
        """Longest recorded prefix per replica, for replicas with at least one block matched.

        One walk down the chain, intersecting the holder sets level by level.
        """
        if self._ttl_s is not None:
            for idx, c in self._caches.items():
                self._forget(idx, c.expire(now))
        out: dict[int, int] = {}
        if not block_hashes:
            return out
        first = self._holders.get(block_hashes[0])
        if not first:
            return out
        alive = set(first)
        depth = 1
        for h in block_hashes[1:]:
            holders = self._holders.get(h)
            deeper = alive & holders if holders else set()
            if len(deeper) < len(alive):
                for idx in alive - deeper:
                    out[idx] = depth
            alive = deeper
            if not alive:
                return out
            depth += 1
        for idx in alive:
            out[idx] = depth
        return out

    def insert(self, replica: ReplicaView, block_hashes: Sequence[int], now: float = 0.0) -> None:
        """Record that a request with this chain was sent to ``replica`` at ``now``."""
        if not block_hashes:
            return
        idx = replica.index
        c = self._caches.get(idx)
        if c is None:
            c = ReplicaPrefixCache(
                max(1, self._capacity_blocks(replica)),
                ttl_s=self._ttl_s,
                hit_window_s=self._hit_window_s,
            )
            self._caches[idx] = c
        self._forget(idx, c.expire(now))
        for h in block_hashes:
            holders = self._holders.get(h)
            if holders is None:
                self._holders[h] = {idx}
            else:
                holders.add(idx)
        self._forget(idx, c.insert(block_hashes, now))

    def _forget(self, replica_index: int, hashes: list[int]) -> None:
        for h in hashes:
            holders = self._holders.get(h)
            if holders is not None:
                holders.discard(replica_index)
                if not holders:
                    del self._holders[h]


def kv_capacity_blocks(block_tokens: int) -> Callable[[ReplicaView], int]:
    """Capacity rule: a replica's KV capacity in tokens over the prefix block size."""

    def capacity(replica: ReplicaView) -> int:
        return max(1, replica.kv_capacity_tokens // block_tokens)

    return capacity
