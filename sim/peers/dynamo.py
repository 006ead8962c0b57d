"""``dynamo``: NVIDIA Dynamo's KV router cost.

Published cost per worker (Dynamo router docs, "Routing Concepts"):

    prefill_blocks = active_prefill_blocks + incoming_prompt_blocks - overlap_blocks
    decode_blocks  = active_decode_blocks + incoming_active_blocks
    cost           = prefill_load_scale * prefill_blocks + decode_blocks

(``prefill_load_scale`` was called ``overlap_score_weight`` in earlier releases; default 1.)
The router picks the lowest cost; with ``router_temperature`` > 0 it samples from a softmax
over the costs min-max normalised to [0, 1], ``p ∝ exp(-normalised / T)``.

What the router sees here. Dynamo normally learns each worker's cached blocks from KV events
published by the engines; this router gets no events, so overlap comes from its own index of
the blocks it sent to each worker — Dynamo's documented no-events ("approximate") mode, which
also forgets blocks after a TTL (120 s by default). The index is bounded by the worker's KV
capacity in blocks rather than Dynamo's global tree size. Active blocks are the router's own
tally, as in Dynamo's slot tracker: a request's uncached prompt blocks count as active prefill
until its first token; its prompt blocks count as active (``active_decode_blocks``) until it
completes. Output blocks are not counted (Dynamo's ``track_output_blocks`` defaults to off),
and blocks shared between in-flight requests are counted once per request (no reuse dedup).

Units: blocks of ``ctx.block_tokens`` tokens; a partial block counts as one.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.domain.prefix_index import PrefixIndex, kv_capacity_blocks
from placement.domain.requests import Request
from placement.errors import InputError
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext

DEFAULT_PREFILL_LOAD_SCALE = 1.0
DEFAULT_TEMPERATURE = 0.0
DEFAULT_BLOCK_TTL_S = 120.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamoConfig:
    """``prefill_load_scale`` (≥ 0), softmax ``temperature`` (0 = argmin), and the TTL of
    blocks in the router's own index (None: no TTL)."""

    prefill_load_scale: float = DEFAULT_PREFILL_LOAD_SCALE
    temperature: float = DEFAULT_TEMPERATURE
    block_ttl_s: float | None = DEFAULT_BLOCK_TTL_S

    def __post_init__(self) -> None:
        if self.prefill_load_scale < 0:
            raise InputError(
                f"got {self.prefill_load_scale}",
                field="dynamo.prefill_load_scale",
                expected=">= 0",
            )
        if self.temperature < 0:
            raise InputError(f"got {self.temperature}", field="dynamo.temperature", expected=">= 0")
        if self.block_ttl_s is not None and not self.block_ttl_s > 0:
            raise InputError(
                f"got {self.block_ttl_s}", field="dynamo.block_ttl_s", expected="> 0 or None"
            )


def blocks_of(tokens: int, block_tokens: int) -> int:
    """Blocks needed for ``tokens`` tokens (ceil; 0 for none)."""
    return -(-max(0, tokens) // block_tokens)


def softmax_sample(costs: list[float], temperature: float, rng: random.Random) -> int:
    """Position drawn from ``exp(-normalised cost / T)``; normalised = min-max to [0, 1]."""
    lo = min(costs)
    span = max(costs) - lo
    if span == 0:
        return rng.randrange(len(costs))
    weights = [math.exp(-(c - lo) / span / temperature) for c in costs]
    return rng.choices(range(len(costs)), weights=weights)[0]


class KvCostPicker:
    """Lowest Dynamo cost; keeps the active-block tally and the overlap index itself.

    A picker is given no clock: ``pick`` takes the request's arrival time as now (it only
    matters for the index TTL); the hooks use the caller's ``now``.
    """

    name = "dynamo-kv-cost-picker"

    def __init__(self, config: DynamoConfig, block_tokens: int, seed: int) -> None:
        self.config = config
        self.block_tokens = block_tokens
        self._rng = random.Random(seed)
        self.index: PrefixIndex[ReplicaView] = PrefixIndex(
            kv_capacity_blocks(block_tokens), ttl_s=config.block_ttl_s
        )
        self.active_prefill_blocks: dict[int, int] = {}  # replica index -> blocks
        self.active_blocks: dict[int, int] = {}
        self._in_flight: dict[int, tuple[int, int, int]] = {}  # req id -> (replica, pf, blocks)

    def overlap_tokens(self, req: Request, matched_blocks: int) -> int:
        """Prompt tokens covered by a prefix match of ``matched_blocks`` hash blocks."""
        return min(matched_blocks * req.block_tokens, req.input_tokens)

    def costs(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        """Dynamo's cost of each candidate for this request (lower is better)."""
        b = self.block_tokens
        matched = self.index.match_all(req.block_hashes, now)
        incoming = blocks_of(req.input_tokens, b)
        scale = self.config.prefill_load_scale
        active_prefill = self.active_prefill_blocks
        active = self.active_blocks
        out = []
        for c in candidates:  # hot loop over the fleet: kept to dict lookups and integer math
            i = c.index
            m = matched.get(i)
            new_prefill = (
                incoming
                if m is None
                else blocks_of(req.input_tokens - self.overlap_tokens(req, m), b)
            )
            prefill = active_prefill.get(i, 0) + new_prefill
            decode = active.get(i, 0) + incoming
            out.append(scale * prefill + decode)
        return out

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        costs = self.costs(req, candidates, now)
        if self.config.temperature > 0:
            return candidates[softmax_sample(costs, self.config.temperature, self._rng)]
        lo = min(costs)
        tied = [c for c, v in zip(candidates, costs, strict=True) if v == lo]
        return tied[0] if len(tied) == 1 else tied[self._rng.randrange(len(tied))]

    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None:
        self._release(req)
        idx = replica.index
        uncached = req.input_tokens - self.overlap_tokens(
            req, self.index.match(idx, req.block_hashes, now)
        )
        prefill = blocks_of(uncached, self.block_tokens)
        blocks = blocks_of(req.input_tokens, self.block_tokens)
        self.active_prefill_blocks[idx] = self.active_prefill_blocks.get(idx, 0) + prefill
        self.active_blocks[idx] = self.active_blocks.get(idx, 0) + blocks
        self._in_flight[req.id] = (idx, prefill, blocks)
        self.index.insert(replica, req.block_hashes, now)

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        rec = self._in_flight.get(req.id)
        if rec is None:
            return
        idx, prefill, blocks = rec
        self.active_prefill_blocks[idx] -= prefill
        self._in_flight[req.id] = (idx, 0, blocks)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self._release(req)

    def _release(self, req: Request) -> None:
        rec = self._in_flight.pop(req.id, None)
        if rec is None:
            return
        idx, prefill, blocks = rec
        self.active_prefill_blocks[idx] -= prefill
        self.active_blocks[idx] -= blocks


def build(ctx: PolicyContext) -> Pipeline:
    """Dynamo's KV router cost with ``settings["dynamo"]``, seeded by ``ctx.seed``."""
    return Pipeline(
        "dynamo",
        filters=[ModelFilter(), HealthFilter()],
        picker=KvCostPicker(ctx.settings_for("dynamo", DynamoConfig), ctx.block_tokens, ctx.seed),
    )
