import random

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.domain.prefix import chain_block_ids
from placement.domain.prefix_index import PrefixIndex, ReplicaPrefixCache
from sim.router import ReplicaView


def chain(*blocks):
    return chain_block_ids(blocks)


def test_match_counts_the_leading_blocks_held():
    cache = ReplicaPrefixCache(100)
    cache.insert(chain(1, 2, 3))
    assert cache.match(chain(1, 2, 3, 4)) == 3
    assert cache.match(chain(1, 2, 9)) == 2
    assert cache.match(chain(9, 2, 3)) == 0  # same block contents after another prefix
    assert cache.match(()) == 0


def test_lru_evicts_leaves_before_their_prefix():
    cache = ReplicaPrefixCache(4)
    a = chain(1, 2, 3)
    cache.insert(a, now=0.0)
    b = chain(1, 5, 6)
    evicted = cache.insert(b, now=1.0)  # 5 distinct blocks for 4 slots
    assert evicted == [a[2]]  # the oldest leaf, never the shared root
    assert cache.match(a) == 2
    assert cache.match(b) == 3


def test_a_chain_longer_than_the_capacity_keeps_its_prefix():
    cache = ReplicaPrefixCache(3)
    cache.insert(chain(1, 2, 3, 4, 5))
    assert cache.match(chain(1, 2, 3, 4, 5)) == 3


def test_ttl_forgets_blocks_untouched_for_that_long():
    index = PrefixIndex(lambda _r: 100, ttl_s=10.0)
    r = ReplicaView(0, "r0", model="m", accelerator="H100-SXM", kv_capacity_tokens=1)
    old, fresh = chain(1, 2), chain(7, 8)
    index.insert(r, old, now=0.0)
    index.insert(r, fresh, now=8.0)
    assert index.match_all(old, now=9.0) == {0: 2}
    assert index.match_all(old, now=11.0) == {}
    assert index.match(0, fresh, now=11.0) == 2
    index.insert(r, fresh, now=15.0)  # touched again: its clock restarts
    assert index.match(0, fresh, now=24.0) == 2
    assert index.match(0, fresh, now=25.5) == 0


def test_hit_count_restarts_after_a_cold_gap():
    cache = ReplicaPrefixCache(10, hit_window_s=5.0)
    c = chain(1)
    for t in (0.0, 1.0, 2.0):
        cache.insert(c, now=t)
    assert dict(cache.coldest())[c[0]] == (2.0, 3)
    cache.insert(c, now=20.0)
    assert dict(cache.coldest())[c[0]] == (20.0, 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 12))
def test_match_all_agrees_with_each_replica_cache(seed, capacity):
    rng = random.Random(seed)
    views = [
        ReplicaView(i, f"r{i}", model="m", accelerator="H100-SXM", kv_capacity_tokens=1)
        for i in range(4)
    ]
    index = PrefixIndex(lambda _r: capacity)
    for step in range(40):
        blocks = [rng.randrange(3) for _ in range(rng.randrange(1, 6))]
        index.insert(views[rng.randrange(4)], chain(*blocks), now=float(step))
        probe = chain(*[rng.randrange(3) for _ in range(rng.randrange(1, 6))])
        expected = {}
        for v in views:
            cache = index.cache(v.index)
            if cache is not None and cache.match(probe) > 0:
                expected[v.index] = cache.match(probe)
            if cache is not None:
                assert len(cache) <= capacity
        assert index.match_all(probe) == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31))
def test_recent_hits_of_coldest_agrees_with_walking_the_lru(seed):
    rng = random.Random(seed)
    cache = ReplicaPrefixCache(8, hit_window_s=3.0)
    for step in range(60):
        now = step * 0.5
        if rng.random() < 0.6:
            cache.insert(chain(*[rng.randrange(3) for _ in range(rng.randrange(1, 5))]), now)
        k, since = rng.randrange(0, 10), now - rng.uniform(0.0, 6.0)
        victims = list(cache.coldest())[:k]
        expected = sum(hits for _, (last, hits) in victims if last >= since)
        assert cache.recent_hits_of_coldest(k, since) == expected
