"""``llm_d``: the llm-d inference scheduler's default profile (Gateway API Inference Extension).

Profile: ``queue-scorer`` (weight 2) + ``kv-cache-utilization-scorer`` (weight 2) +
``prefix-cache-scorer`` (weight 3), weighted sum, ``max-score-picker`` (random among ties).

* queue: the scraped waiting-queue length, min-max normalised, fewer is better
  (``(max - q) / (max - min)``, all 1 when equal);
* KV cache: ``1 - kv_usage`` (scraped, 0..1);
* prefix: the share of the request's first ``max_prefix_blocks`` (256) block hashes that form
  the longest prefix found in the scheduler's own per-replica LRU index of what it sent there
  (the approximate prefix cache; updated with the chosen replica after every pick).

The LRU capacity per replica defaults to the replica's KV capacity in blocks — what the plugin
computes when it can read the engine's ``num_gpu_blocks`` (its ``autoTune``) — and can be fixed
instead (the plugin's static default is 31,250 blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.domain.prefix_index import PrefixIndex, kv_capacity_blocks
from placement.domain.requests import Request
from placement.domain.scoring import lower_is_better
from placement.errors import InputError
from sim.peers.filters import HealthFilter, ModelFilter
from sim.peers.pickers import MaxScorePicker
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from collections.abc import Callable

    from sim.peers.context import PolicyContext

DEFAULT_QUEUE_WEIGHT = 2.0
DEFAULT_KV_CACHE_WEIGHT = 2.0
DEFAULT_PREFIX_WEIGHT = 3.0
DEFAULT_MAX_PREFIX_BLOCKS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmdConfig:
    """Scorer weights, prefix depth matched, and a fixed LRU capacity (None: KV capacity)."""

    queue_weight: float = DEFAULT_QUEUE_WEIGHT
    kv_cache_weight: float = DEFAULT_KV_CACHE_WEIGHT
    prefix_weight: float = DEFAULT_PREFIX_WEIGHT
    max_prefix_blocks: int = DEFAULT_MAX_PREFIX_BLOCKS
    lru_capacity_blocks: int | None = None

    def __post_init__(self) -> None:
        for field in ("queue_weight", "kv_cache_weight", "prefix_weight"):
            value = getattr(self, field)
            if value < 0:
                raise InputError(f"got {value}", field=f"llm_d.{field}", expected=">= 0")
        if self.max_prefix_blocks < 1:
            raise InputError(
                f"got {self.max_prefix_blocks}", field="llm_d.max_prefix_blocks", expected=">= 1"
            )
        if self.lru_capacity_blocks is not None and self.lru_capacity_blocks < 1:
            raise InputError(
                f"got {self.lru_capacity_blocks}",
                field="llm_d.lru_capacity_blocks",
                expected=">= 1",
            )


class QueueScorer:
    """Grades the scraped ``num_waiting``: the shortest queue 1, the longest 0."""

    name = "queue-scorer"

    def score(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        return lower_is_better([c.num_waiting for c in candidates])


class KvCacheUtilizationScorer:
    """Grades free KV cache, ``1 - kv_usage`` (scraped fraction, clamped to 0..1)."""

    name = "kv-cache-utilization-scorer"

    def score(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        return [1.0 - min(1.0, max(0.0, c.kv_usage)) for c in candidates]


class PrefixCacheScorer:
    """Grades the fraction of the request's (first ``max_blocks``) blocks already sent there.

    Keeps the approximate index: after each pick, the chosen replica records the request's
    blocks (``on_routed``).
    """

    name = "prefix-cache-scorer"

    def __init__(self, max_blocks: int, capacity_blocks: Callable[[ReplicaView], int]) -> None:
        self.max_blocks = max_blocks
        self.index: PrefixIndex[ReplicaView] = PrefixIndex(capacity_blocks)

    def score(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        hashes = req.block_hashes[: self.max_blocks]
        if not hashes:
            return [0.0] * len(candidates)
        matched = self.index.match_all(hashes)
        total = len(hashes)
        return [matched.get(c.index, 0) / total for c in candidates]

    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.index.insert(replica, req.block_hashes[: self.max_blocks], now)


def build(ctx: PolicyContext) -> Pipeline:
    """The llm-d default profile with ``settings["llm_d"]`` weights; ties broken by ``ctx.seed``."""
    cfg = ctx.settings_for("llm_d", LlmdConfig)
    fixed = cfg.lru_capacity_blocks
    capacity = kv_capacity_blocks(ctx.block_tokens) if fixed is None else (lambda _r: fixed)
    return Pipeline(
        "llm_d",
        filters=[ModelFilter(), HealthFilter()],
        scorers=[
            (QueueScorer(), cfg.queue_weight),
            (KvCacheUtilizationScorer(), cfg.kv_cache_weight),
            (PrefixCacheScorer(cfg.max_prefix_blocks, capacity), cfg.prefix_weight),
        ],
        picker=MaxScorePicker(seed=ctx.seed),
    )
