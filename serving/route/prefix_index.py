"""The router's approximate prefix index: which prefix blocks it sent to which replica.

Without cache events from the engines, a router knows only where it sent each prompt; like the
simulator's peer routers (:mod:`placement.domain.prefix_index`) it keeps, per replica, an LRU
of those blocks bounded by the replica's KV capacity, plus an inverted index (block hash →
replica ids) so a request is matched against the fleet in one walk down its chain.
Keyed by replica id, so it survives re-registration of the fleet.

The LRU holds block hashes only (no touch times or counts: nothing here reads them), so
recording a chain whose blocks are held allocates nothing: an insert runs on every decision,
and every object it allocated would bring the next garbage collection closer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from placement.domain.prefix_index import deepest_matches


class RouterPrefixIndex:
    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self._lrus: dict[str, OrderedDict[int, None]] = {}  # oldest first
        self._capacity_blocks: dict[str, int] = {}
        # block hash → the replica ids holding it, as a tuple (one or a few): a tuple of strings
        # is dropped from the garbage collector's lists at its first collection, where a set
        # per block would be walked by every full collection as the index grows
        self._holders: dict[int, tuple[str, ...]] = {}
        # replica id → the one tuple naming it alone, shared by every block only it holds: most
        # blocks have one holder, and a tuple made per block is an object for the collector
        self._alone: dict[str, tuple[str]] = {}

    def match_all(self, block_hashes: Sequence[int]) -> dict[str, int]:
        """Longest recorded prefix in blocks per replica id holding at least its first block."""
        return deepest_matches(self._holders, block_hashes)

    def blocks(self, replica_id: str) -> int:
        """Blocks recorded for a replica (0 if none)."""
        lru = self._lrus.get(replica_id)
        return 0 if lru is None else len(lru)

    def insert(
        self, replica_id: str, kv_capacity_tokens: int, block_hashes: Sequence[int], now: float
    ) -> None:
        """Record that a prompt with this chain was sent to ``replica_id`` (``now`` is kept
        for the callers' symmetry with :class:`~placement.domain.prefix_index.PrefixIndex`)."""
        if not block_hashes:
            return
        lru = self._lrus.get(replica_id)
        if lru is None:
            lru = self._lrus[replica_id] = OrderedDict()
            self._capacity_blocks[replica_id] = max(1, kv_capacity_tokens // self.block_tokens)
        alone = self._alone.get(replica_id)
        if alone is None:
            alone = self._alone[replica_id] = (replica_id,)
        all_holders = self._holders
        touch = lru.move_to_end
        for h in reversed(block_hashes):  # deepest first, root last: keeps prefix closure
            if h in lru:
                touch(h)
            else:
                lru[h] = None
                holders = all_holders.get(h)
                if holders is None:
                    all_holders[h] = alone
                elif replica_id not in holders:
                    all_holders[h] = (*holders, replica_id)
        capacity = self._capacity_blocks[replica_id]
        while len(lru) > capacity:
            h = lru.popitem(last=False)[0]
            holders = all_holders.get(h)
            if holders is not None and replica_id in holders:
                if len(holders) == 1:
                    del all_holders[h]
                else:
                    left = tuple([r for r in holders if r != replica_id])
                    all_holders[h] = self._alone.get(left[0], left) if len(left) == 1 else left
