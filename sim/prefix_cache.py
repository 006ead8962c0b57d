"""A replica's paged KV memory with a block-level prefix cache.

Memory is counted in tokens. Prompt blocks (one block = ``block_tokens`` tokens, keyed by the
request's chained prefix block hash) live in the cache with a reference count; a block no
running sequence references stays cached but evictable, in LRU order. Everything else a
sequence holds (its partial last prompt block, its generated tokens) is private to it.

``used`` = tokens of every cached block (referenced or not) + private tokens of running
sequences; ``free_for_new`` adds the evictable tokens back, since they can be reclaimed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    __slots__ = (
        "_lru",
        "_refs",
        "_tokens",
        "capacity",
        "evictable",
        "hit_tokens",
        "lookup_tokens",
        "used",
    )

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = capacity_tokens
        self._refs: dict[int, int] = {}  # block hash -> running sequences referencing it
        self._tokens: dict[int, int] = {}  # block hash -> tokens in that block
        self._lru: OrderedDict[int, None] = OrderedDict()  # unreferenced blocks, oldest first
        self.used = 0
        self.evictable = 0
        self.hit_tokens = 0
        self.lookup_tokens = 0

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._tokens

    @property
    def usage(self) -> float:
        """Share of KV memory held by running sequences (what vLLM reports as KV usage)."""
        return (self.used - self.evictable) / self.capacity if self.capacity else 0.0

    def free_for_new(self) -> int:
        return self.capacity - self.used + self.evictable

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached (hash chaining makes this a prefix)."""
        n = 0
        tokens = self._tokens
        for h in hashes:
            if h not in tokens:
                break
            n += 1
        return n

    def acquire(self, hashes: Sequence[int], block_tokens: int) -> None:
        """Reference cached or new prompt blocks for a running sequence.

        Blocks not yet cached are added (their memory is charged now); the caller has checked
        there is room with :meth:`make_room`.
        """
        refs, tokens, lru = self._refs, self._tokens, self._lru
        for h in hashes:
            r = refs.get(h)
            if r is None:
                refs[h] = 1
                tokens[h] = block_tokens
                self.used += block_tokens
            else:
                if r == 0:
                    del lru[h]
                    self.evictable -= tokens[h]
                refs[h] = r + 1

    def release(self, hashes: Sequence[int]) -> None:
        """Drop a sequence's references; blocks nobody holds become evictable.

        Deepest blocks are queued for eviction first, so a shared head outlives its tails.
        """
        refs, tokens, lru = self._refs, self._tokens, self._lru
        for h in reversed(hashes):
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                lru[h] = None
                self.evictable += tokens[h]

    def make_room(self, tokens_needed: int) -> bool:
        """Evict LRU blocks until ``tokens_needed`` fit; False (nothing evicted) if they cannot."""
        if self.capacity - self.used + self.evictable < tokens_needed:
            return False
        lru, refs, tokens = self._lru, self._refs, self._tokens
        while self.capacity - self.used < tokens_needed:
            h, _ = lru.popitem(last=False)
            t = tokens.pop(h)
            del refs[h]
            self.used -= t
            self.evictable -= t
        return True

    def clear(self) -> None:
        self._refs.clear()
        self._tokens.clear()
        self._lru.clear()
        self.used = 0
        self.evictable = 0
