"""The router's approximate prefix index: which prefix blocks it sent to which replica.

Without cache events from the engines, a router knows only where it sent each prompt; like the
simulator's peer routers (:mod:`placement.domain.prefix_index`) it keeps, per replica, an LRU
of those blocks bounded by the replica's KV capacity, plus an inverted index (block hash →
replica ids) so a request is matched against the fleet in one walk down its chain.
Keyed by replica id, so it survives re-registration of the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.domain.prefix_index import ReplicaPrefixCache, deepest_matches


class RouterPrefixIndex:
    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self._caches: dict[str, ReplicaPrefixCache] = {}
        self._holders: dict[int, set[str]] = {}

    def match_all(self, block_hashes: Sequence[int]) -> dict[str, int]:
        """Longest recorded prefix in blocks per replica id holding at least its first block."""
        return deepest_matches(self._holders, block_hashes)

    def insert(
        self, replica_id: str, kv_capacity_tokens: int, block_hashes: Sequence[int], now: float
    ) -> None:
        """Record that a prompt with this chain was sent to ``replica_id``."""
        if not block_hashes:
            return
        cache = self._caches.get(replica_id)
        if cache is None:
            cache = ReplicaPrefixCache(max(1, kv_capacity_tokens // self.block_tokens))
            self._caches[replica_id] = cache
        for h in block_hashes:
            holders = self._holders.get(h)
            if holders is None:
                self._holders[h] = {replica_id}
            else:
                holders.add(replica_id)
        for h in cache.insert(block_hashes, now):
            holders = self._holders.get(h)
            if holders is not None:
                holders.discard(replica_id)
                if not holders:
                    del self._holders[h]
