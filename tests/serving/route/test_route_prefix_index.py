"""The router's prefix index: an LRU per replica bounded by its KV capacity, and the inverted
index that matches a chain against every replica in one walk."""

from __future__ import annotations

import random

from serving.route.prefix_index import RouterPrefixIndex

BLOCK = 16


def test_a_chain_sent_to_a_replica_matches_there_to_its_depth() -> None:
    index = RouterPrefixIndex(BLOCK)
    index.insert("a", 100 * BLOCK, [1, 2, 3], 0.0)
    index.insert("b", 100 * BLOCK, [1, 2], 0.0)
    assert index.match_all([1, 2, 3, 4]) == {"a": 3, "b": 2}
    assert index.match_all([9]) == {}


def test_a_replica_keeps_only_its_capacity_and_forgets_the_least_recent_chain() -> None:
    index = RouterPrefixIndex(BLOCK)
    index.insert("a", 4 * BLOCK, [1, 2], 0.0)
    index.insert("a", 4 * BLOCK, [5, 6], 1.0)
    index.insert("a", 4 * BLOCK, [1, 2], 2.0)  # touched again: [5, 6] is now the oldest
    index.insert("a", 4 * BLOCK, [7], 3.0)  # one over: the oldest block, 6, goes
    assert index.blocks("a") == 4
    assert index.match_all([5, 6]) == {"a": 1}  # deepest block first: the root stays
    index.insert("a", 4 * BLOCK, [7, 8], 4.0)
    assert index.match_all([1, 2]) == {"a": 2}
    assert index.match_all([5, 6]) == {}
    assert index.match_all([7, 8]) == {"a": 2}


def test_eviction_on_one_replica_leaves_the_others_holding_the_block() -> None:
    index = RouterPrefixIndex(BLOCK)
    index.insert("a", 1 * BLOCK, [1], 0.0)
    index.insert("b", 8 * BLOCK, [1], 0.0)
    index.insert("a", 1 * BLOCK, [2], 1.0)
    assert index.match_all([1]) == {"b": 1}
    assert index.match_all([2]) == {"a": 1}


def test_a_chain_longer_than_the_cache_keeps_its_root() -> None:
    index = RouterPrefixIndex(BLOCK)
    index.insert("a", 2 * BLOCK, [1, 2, 3, 4], 0.0)
    assert index.blocks("a") == 2
    assert index.match_all([1, 2, 3, 4]) == {"a": 2}


class _Reference:
    """The index as one walk down each chain: touch a held block, add a new one, deepest
    first; evict the least recent blocks over capacity."""

    def __init__(self) -> None:
        self.lrus: dict[str, list[int]] = {}
        self.holders: dict[int, set[str]] = {}

    def insert(self, replica: str, capacity: int, chain: list[int]) -> None:
        lru = self.lrus.setdefault(replica, [])
        for h in reversed(chain):
            if h in lru:
                lru.remove(h)
            else:
                self.holders.setdefault(h, set()).add(replica)
            lru.append(h)
        while len(lru) > capacity:
            h = lru.pop(0)
            self.holders[h].discard(replica)
            if not self.holders[h]:
                del self.holders[h]


def test_the_index_keeps_the_order_and_holders_a_block_by_block_walk_keeps() -> None:
    rng = random.Random(7)
    index = RouterPrefixIndex(BLOCK)
    reference = _Reference()
    roots = [rng.randrange(1, 10**6) for _ in range(6)]
    for step in range(3000):
        replica = rng.choice("abc")
        capacity = {"a": 12, "b": 30, "c": 5}[replica]
        # chains grow from a few shared roots, so they are often held whole, in part, or not
        root = rng.choice(roots)
        chain = [root * 1000 + d for d in range(rng.randint(1, 9))]
        if rng.random() < 0.3:
            chain = [*chain, rng.randrange(10**9, 2 * 10**9)]  # a new tail
        chain_t = tuple(chain) if step % 2 else chain
        index.insert(replica, capacity * BLOCK, chain_t, float(step))
        reference.insert(replica, capacity, chain)
        assert list(index._lrus[replica]) == reference.lrus[replica]
    assert {h: set(held) for h, held in index._holders.items()} == reference.holders


class _OneByOne:
    """The index as it was first written: each block of a chain touched (or added) in turn,
    deepest first, then the least recent blocks evicted: the reference the index must match."""

    def __init__(self) -> None:
        self.lrus: dict[str, list[int]] = {}

    def insert(self, replica: str, capacity: int, chain: list[int]) -> None:
        lru = self.lrus.setdefault(replica, [])
        for h in reversed(chain):
            if h in lru:
                lru.remove(h)
            lru.append(h)
        del lru[: max(0, len(lru) - capacity)]


def test_the_index_keeps_what_touching_each_block_in_turn_keeps() -> None:
    rng = random.Random(5)
    index, reference = RouterPrefixIndex(BLOCK), _OneByOne()
    capacity = {"a": 3, "b": 8, "c": 20}
    for _ in range(3_000):
        replica = rng.choice("abc")
        # chains of a few roots, some long, some holding a block twice
        chain = [rng.randrange(6)] + [rng.randrange(40) for _ in range(rng.randrange(0, 12))]
        index.insert(replica, capacity[replica] * BLOCK, chain, 0.0)
        reference.insert(replica, capacity[replica], chain)
        for r, kept in reference.lrus.items():
            assert list(index._lrus[r]) == kept  # the same blocks in the same order
        probe = [rng.randrange(6)] + [rng.randrange(40) for _ in range(8)]
        want: dict[str, int] = {}
        for r, kept in reference.lrus.items():
            depth = 0
            while depth < len(probe) and probe[depth] in kept:
                depth += 1
            if depth:
                want[r] = depth
        assert index.match_all(probe) == want


def test_blocks_held_by_one_replica_share_one_holder_tuple() -> None:
    # a tuple per block would be one more object per block for the garbage collector
    index = RouterPrefixIndex(BLOCK)
    index.insert("a", 100 * BLOCK, [1, 2, 3], 0.0)
    index.insert("c", 1 * BLOCK, [1], 0.0)
    holders = index._holders
    assert holders[2] is holders[3] == ("a",)
    assert holders[1] == ("a", "c")
    index.insert("c", 1 * BLOCK, [6], 0.0)  # c evicts 1: a holds it alone again
    assert holders[1] is holders[2]
    assert holders[6] == ("c",)
