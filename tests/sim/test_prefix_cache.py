from sim.prefix_cache import PrefixCache


def test_match_counts_leading_blocks_only():
    c = PrefixCache(10_000)
    c.acquire((1, 2, 3), 100)
    assert c.match((1, 2, 3, 4)) == 3
    assert c.match((1, 9, 3)) == 1
    assert c.match((9, 1)) == 0


def test_acquire_charges_new_blocks_once():
    c = PrefixCache(10_000)
    c.acquire((1, 2), 100)
    c.acquire((1, 2, 3), 100)
    assert c.used == 300
    assert c.evictable == 0


def test_release_makes_blocks_evictable_and_reacquire_pins_them():
    c = PrefixCache(10_000)
    c.acquire((1, 2), 100)
    c.release((1, 2))
    assert c.evictable == 200
    assert c.usage == 0.0
    c.acquire((1,), 100)
    assert c.evictable == 100


def test_make_room_evicts_deepest_least_recent_first():
    c = PrefixCache(400)
    c.acquire((1, 2), 100)
    c.release((1, 2))  # 2 queued before 1: tails leave first
    c.acquire((7, 8), 100)
    assert c.make_room(100)  # 400 - 400 used + 200 evictable
    assert 2 not in c and 1 in c
    assert c.used == 300


def test_make_room_refuses_without_evicting_when_it_cannot_fit():
    c = PrefixCache(300)
    c.acquire((1, 2), 100)
    c.release((2,))
    assert not c.make_room(250)
    assert 2 in c and c.used == 200
