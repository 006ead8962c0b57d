"""The router's prefix index: an LRU per replica bounded by its KV capacity, and the inverted
index that matches a chain against every replica in one walk."""

from __future__ import annotations

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
