"""``chbl``: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, SODA 2018).

Each replica owns ``virtual_nodes`` points on a 64-bit hash ring. A request is keyed by its
prefix — the hash of its ``key_blocks``-th block (or its last, if shorter), or its tenant when
it has no block hashes — and walks clockwise from the key to the first replica that can take
it without exceeding the load bound

    load_after ≤ ceil((1 + ε) · (total outstanding + 1) · w / W)

where loads are the router's outstanding counters over the eligible replicas and w / W is the
replica's share of their summed ``weight`` (1/n on a homogeneous fleet, the paper's form).
Since the bound exceeds the average load after placement, some replica always qualifies.
Requests sharing a prefix land on the same replica until it is ε above average, then spill to
the next replica on the ring, which is again the same for all of them.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from placement.domain.scoring import load_bound
from placement.errors import InputError
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext

DEFAULT_EPSILON = 0.25
DEFAULT_KEY_BLOCKS = 4
DEFAULT_VIRTUAL_NODES = 100
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ChblConfig:
    """``epsilon``: load slack over the average (> 0); ``key_blocks``: prefix depth of the key
    in blocks (≥ 1); ``virtual_nodes``: ring points per replica (≥ 1)."""

    epsilon: float = DEFAULT_EPSILON
    key_blocks: int = DEFAULT_KEY_BLOCKS
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise InputError(f"got {self.epsilon}", field="chbl.epsilon", expected="a number > 0")
        if self.key_blocks < 1:
            raise InputError(f"got {self.key_blocks}", field="chbl.key_blocks", expected=">= 1")
        if self.virtual_nodes < 1:
            raise InputError(
                f"got {self.virtual_nodes}", field="chbl.virtual_nodes", expected=">= 1"
            )


def _hash_text(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _mix(x: int) -> int:
    # splitmix64 finaliser: spreads block hashes independently of the ring points' hash.
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def prefix_key(req: Request, key_blocks: int) -> int:
    """Ring position of a request: its prefix at depth ``key_blocks``, else its tenant."""
    hashes = req.block_hashes
    if hashes:
        return _mix(hashes[min(key_blocks, len(hashes)) - 1])
    return _hash_text("tenant:" + req.tenant)


class BoundedLoadHashPicker:
    """The ring walk; holds the ring, built lazily over every replica it has been offered.

    Replicas that are filtered out stay on the ring and are skipped, so a replica going down
    only moves its own keys (to their next replica clockwise), as consistent hashing should.
    """

    name = "bounded-load-hash-picker"

    def __init__(self, config: ChblConfig) -> None:
        self.config = config
        self._points: list[int] = []  # sorted ring positions
        self._owners: list[int] = []  # replica index owning each point
        self._on_ring: set[int] = set()

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        self._add_new(candidates)
        total = 0
        total_weight = 0.0
        for c in candidates:
            total += c.outstanding
            total_weight += c.weight
        eps = self.config.epsilon
        uniform = total_weight <= 0.0
        n = len(candidates)
        by_index = {
            c.index: c
            for c in candidates
            if c.outstanding + 1
            <= load_bound(total, 1.0 / n if uniform else c.weight / total_weight, eps)
        }
        n_points = len(self._points)
        start = bisect.bisect_left(self._points, prefix_key(req, self.config.key_blocks))
        for step in range(n_points):
            chosen = by_index.get(self._owners[(start + step) % n_points])
            if chosen is not None:
                return chosen
        # unreachable: the bound exceeds every replica's fair share of the load after placing
        return min(candidates, key=lambda c: (c.outstanding, c.index))

    def _add_new(self, candidates: list[ReplicaView]) -> None:
        new = [c for c in candidates if c.index not in self._on_ring]
        if not new:
            return
        ring = list(zip(self._points, self._owners, strict=True))
        for c in new:
            self._on_ring.add(c.index)
            ring.extend(
                (_hash_text(f"{c.id}#{v}"), c.index) for v in range(self.config.virtual_nodes)
            )
        ring.sort()
        self._points = [p for p, _ in ring]
        self._owners = [o for _, o in ring]


def build(ctx: PolicyContext) -> Pipeline:
    """Consistent hashing with bounded loads, parameters from ``settings["chbl"]``."""
    return Pipeline(
        "chbl",
        filters=[ModelFilter(), HealthFilter()],
        picker=BoundedLoadHashPicker(ctx.settings_for("chbl", ChblConfig)),
    )
