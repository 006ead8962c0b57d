"""The result cache: LRU within a byte budget, hit ratio counted, oversize answers not kept."""

from __future__ import annotations

from serving.gateway.result_cache import ENTRY_OVERHEAD_BYTES, CachedAnswer, ResultCache


def _answer(size: int) -> CachedAnswer:
    return CachedAnswer("application/json", b"x" * (size - ENTRY_OVERHEAD_BYTES), 10, 5)


def test_hits_misses_and_the_ratio() -> None:
    cache = ResultCache(max_bytes=10_000)
    assert cache.get(b"a") is None
    cache.put(b"a", _answer(1000))
    assert cache.get(b"a") == _answer(1000)
    assert (cache.hits, cache.misses, cache.hit_ratio) == (1, 1, 0.5)


def test_the_least_recently_used_goes_first_and_the_budget_holds() -> None:
    cache = ResultCache(max_bytes=8000)
    for key in (b"a", b"b", b"c", b"d"):
        assert cache.put(key, _answer(1000))
    cache.get(b"a")  # a is now the most recent
    for key in (b"e", b"f", b"g", b"h", b"i"):
        cache.put(key, _answer(1000))
    assert cache.bytes <= 8000
    assert cache.get(b"a") is not None
    assert cache.get(b"b") is None  # the oldest untouched entries were evicted


def test_an_answer_over_an_eighth_of_the_budget_is_not_kept() -> None:
    cache = ResultCache(max_bytes=8000)
    assert not cache.put(b"big", _answer(1001))
    assert cache.bytes == 0 and len(cache) == 0


def test_replacing_a_key_does_not_count_it_twice() -> None:
    cache = ResultCache(max_bytes=8000)
    cache.put(b"a", _answer(500))
    cache.put(b"a", _answer(700))
    assert cache.bytes == 700 and len(cache) == 1
