"""``sglang_cache_aware``: the SGLang router's (SGLang Model Gateway's) cache-aware policy.

Published rule (sgl-router README and ``cache_aware`` policy docs):

* load = requests the router has in flight on a worker (here ``ReplicaView.outstanding``);
* the fleet is *imbalanced* when both ``max_load - min_load > balance_abs_threshold`` and
  ``max_load > balance_rel_threshold * min_load``; then route to the least loaded worker;
* otherwise match the request against each worker's approximate tree of the prompts the
  router sent there; match rate = matched prefix length / request length; if the best rate
  exceeds ``cache_threshold`` route to that worker, else to the worker with the smallest tree
  (the most free cache);
* either way, insert the request into the chosen worker's tree; trees are LRU-bounded by
  ``max_tree_size``.

Differences here: the trees hold prefix block hashes rather than raw characters (so matches
are block-granular) and are trimmed on insert rather than by a periodic eviction thread.
Defaults are SGLang's: 0.3, 64, 1.5; the tree bound 2**26 characters becomes blocks at
:data:`CHARS_PER_TOKEN` characters per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.domain.prefix_index import PrefixIndex
from placement.domain.requests import Request
from placement.errors import InputError
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext

DEFAULT_CACHE_THRESHOLD = 0.3
DEFAULT_BALANCE_ABS_THRESHOLD = 64
DEFAULT_BALANCE_REL_THRESHOLD = 1.5
SGLANG_MAX_TREE_CHARS = 2**26  # SGLang's default max_tree_size, in characters
CHARS_PER_TOKEN = 4  # rough English average, to turn the character bound into blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class SglangConfig:
    """Thresholds of the cache-aware rule. ``max_tree_blocks`` None derives the per-worker
    tree bound from SGLang's character bound and the prefix block size."""

    cache_threshold: float = DEFAULT_CACHE_THRESHOLD
    balance_abs_threshold: int = DEFAULT_BALANCE_ABS_THRESHOLD
    balance_rel_threshold: float = DEFAULT_BALANCE_REL_THRESHOLD
    max_tree_blocks: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.cache_threshold <= 1.0:
            raise InputError(
                f"got {self.cache_threshold}", field="sglang.cache_threshold", expected="0..1"
            )
        if self.balance_abs_threshold < 0:
            raise InputError(
                f"got {self.balance_abs_threshold}",
                field="sglang.balance_abs_threshold",
                expected=">= 0",
            )
        if self.balance_rel_threshold < 1.0:
            raise InputError(
                f"got {self.balance_rel_threshold}",
                field="sglang.balance_rel_threshold",
                expected=">= 1",
            )
        if self.max_tree_blocks is not None and self.max_tree_blocks < 1:
            raise InputError(
                f"got {self.max_tree_blocks}", field="sglang.max_tree_blocks", expected=">= 1"
            )


def is_imbalanced(loads: list[int], abs_threshold: float, rel_threshold: float) -> bool:
    """SGLang's test: imbalanced when the spread exceeds both the absolute and the ratio gate."""
    hi = max(loads)
    lo = min(loads)
    return hi - lo > abs_threshold and hi > rel_threshold * lo


class CacheAwarePicker:
    """Shortest queue when imbalanced, else best prefix match or the emptiest tree."""

    name = "sglang-cache-aware-picker"

    def __init__(self, config: SglangConfig, max_tree_blocks: int) -> None:
        self.config = config
        self.trees: PrefixIndex[ReplicaView] = PrefixIndex(lambda _replica: max_tree_blocks)

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        cfg = self.config
        loads = [c.outstanding for c in candidates]
        if is_imbalanced(loads, cfg.balance_abs_threshold, cfg.balance_rel_threshold):
            return min(candidates, key=lambda c: (c.outstanding, c.index))
        matched = self.trees.match_all(req.block_hashes)
        best: ReplicaView | None = None
        best_blocks = 0
        for c in candidates:
            m = matched.get(c.index, 0)
            if m > best_blocks or (
                m == best_blocks and best is not None and c.outstanding < best.outstanding
            ):
                best, best_blocks = c, m
        if best is not None and req.input_tokens > 0:
            matched_tokens = min(best_blocks * req.block_tokens, req.input_tokens)
            if matched_tokens / req.input_tokens > cfg.cache_threshold:
                return best
        return min(candidates, key=lambda c: (self.trees.size(c.index), c.outstanding, c.index))

    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.trees.insert(replica, req.block_hashes, now)


def build(ctx: PolicyContext) -> Pipeline:
    """SGLang's cache-aware policy with ``settings["sglang_cache_aware"]`` thresholds."""
    cfg = ctx.settings_for("sglang_cache_aware", SglangConfig)
    max_blocks = cfg.max_tree_blocks
    if max_blocks is None:
        max_blocks = max(1, SGLANG_MAX_TREE_CHARS // (CHARS_PER_TOKEN * ctx.block_tokens))
    return Pipeline(
        "sglang_cache_aware",
        filters=[ModelFilter(), HealthFilter()],
        picker=CacheAwarePicker(cfg, max_blocks),
    )
