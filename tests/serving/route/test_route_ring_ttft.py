"""The per-pool hash ring and the per-kind prefill table."""

from __future__ import annotations

import random

from serving.route.ring import HashRing
from serving.route.ttft import prefill_table


def test_preference_table_matches_the_walk() -> None:
    ring = HashRing([(i, f"r{i}") for i in range(30)], 16)
    rng = random.Random(3)
    for _ in range(300):
        key = rng.getrandbits(30)
        walk = list(ring.successors(key))
        assert sorted(walk) == list(range(30))
        assert ring.preference(key) == tuple(walk[:8])


def test_removing_a_replica_moves_only_its_keys() -> None:
    full = HashRing([(i, f"r{i}") for i in range(10)], 32)
    less = HashRing([(i, f"r{i}") for i in range(10) if i != 4], 32)
    rng = random.Random(5)
    for _ in range(500):
        key = rng.getrandbits(30)
        before = full.preference(key)[0]
        after = less.preference(key)[0]
        assert before == 4 or before == after


def test_prefill_table_grows_with_tokens_and_queue() -> None:
    t = prefill_table("H100-SXM", "llama-3-8b", 1)
    times = [t.ttft(u, 0.0) for u in (1, 10, 100, 1_000, 10_000, 100_000, 300_000)]
    assert times == sorted(times) and times[0] > 0
    assert t.ttft(1_000, 5_000.0) > t.ttft(1_000, 0.0)


def test_unknown_kind_gets_the_generic_table() -> None:
    t = prefill_table("NoSuchGPU", "llama-3-8b", 1)
    assert t.label == "generic" and t.ttft(1_000, 0.0) > 0
