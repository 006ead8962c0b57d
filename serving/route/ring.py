"""A consistent-hashing ring over one model pool, built once per fleet change.

Each replica owns ``virtual_nodes`` points on a 2^30 ring (a hash of ``id#v``). A key walks
clockwise from its position; :meth:`HashRing.successors` yields the distinct replica indices
met on the way, so the same key meets the same replicas in the same order, and removing a
replica only moves its own keys (to the next owner clockwise).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator, Sequence

RING_BITS = 30  # positions fit one CPython digit, so the bisection compares machine words


def point_of(text: str) -> int:
    """Ring position of a virtual node's name."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> (64 - RING_BITS)


def key_of(block_hash: int) -> int:
    """Ring position of a 63-bit prefix block hash. Block hashes are already the output of a
    mixing function (:mod:`placement.domain.prefix`), uniform and unrelated to the points' BLAKE2b,
    so their top bits are enough (and cost nothing on the hot path)."""
    return (block_hash >> (63 - RING_BITS)) & ((1 << RING_BITS) - 1)


PREFERENCE_DEPTH = 8  # distinct owners precomputed after each point


class HashRing:
    """Points of the replicas ``members`` (fleet indices with their ids), sorted.

    ``preference(key)`` answers the common walk from a table: for each point, the first
    :data:`PREFERENCE_DEPTH` distinct owners from it clockwise, so the hot path does one
    bisection and reads a tuple; :meth:`successors` walks the whole pool when that is not
    enough.
    """

    __slots__ = ("_owners", "_points", "_preference", "size")

    def __init__(self, members: Sequence[tuple[int, str]], virtual_nodes: int) -> None:
        ring = sorted(
            (point_of(f"{rid}#{v}"), index) for index, rid in members for v in range(virtual_nodes)
        )
        self._points = [p for p, _ in ring]
        self._owners = [o for _, o in ring]
        self.size = len(members)
        self._preference = self._preference_table()

    def _preference_table(self) -> list[tuple[int, ...]]:
        owners = self._owners
        n = len(owners)
        depth = min(PREFERENCE_DEPTH, self.size)
        table: list[tuple[int, ...]] = [()] * n
        # walk backwards: the list after point p is owner p then the list after p+1, deduped
        if n == 0:
            return table
        following: list[int] = []
        for p in range(n - 1, -1, -1):  # seed with a full lap so the wrap-around is right
            following = _prepend(owners[p], following, depth)
        for p in range(n - 1, -1, -1):
            following = _prepend(owners[p], following, depth)
            table[p] = tuple(following)
        return table

    def preference(self, key: int) -> tuple[int, ...]:
        """The first :data:`PREFERENCE_DEPTH` distinct replicas clockwise from ``key``."""
        points = self._points
        if not points:
            return ()
        start = bisect.bisect_left(points, key)
        return self._preference[start if start < len(points) else 0]

    def successors(self, key: int) -> Iterator[int]:
        """Distinct replica indices clockwise from ``key``; each pool member exactly once."""
        points, owners = self._points, self._owners
        n = len(points)
        if n == 0:
            return
        start = bisect.bisect_left(points, key)
        seen: set[int] = set()
        remaining = self.size
        for step in range(n):
            owner = owners[(start + step) % n]
            if owner not in seen:
                seen.add(owner)
                yield owner
                remaining -= 1
                if remaining == 0:
                    return


def _prepend(owner: int, following: list[int], depth: int) -> list[int]:
    out = [owner]
    for o in following:
        if o != owner:
            out.append(o)
            if len(out) >= depth:
                break
    return out
