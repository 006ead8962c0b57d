"""``preble_e2``: Preble's E2 (exploit / explore) global scheduling (Srivatsa et al., ICLR 2025).

Per request, with ``matched`` the longest cached prefix (tokens) over the replicas:

* **exploit** when ``matched > input - matched`` (the cached part outweighs what is left to
  prefill): send it to a replica holding that longest prefix, the least loaded if several;
* **explore** otherwise: send it to the replica minimising ``L + M + P``, where
  ``L`` is the replica's load — the prefill and decode work of the requests routed to it in the
  last ``window_s`` seconds; ``M`` the eviction cost — the prefill work of recomputing the
  cached blocks it would have to evict (LRU) to fit this request's uncached blocks, each
  weighted by its hits within the window; ``P`` this request's prefill work there (its
  uncached tokens).

What the router sees here. Preble's global scheduler keeps a radix tree of what it placed
where and profiles prefill/decode times per GPU; this router keeps the shared per-replica
prefix index (bounded by each replica's KV capacity) and prices work in prefill-token
equivalents: a prompt token costs ``prefill_token_cost``, a generated token
``decode_token_cost`` (decode is memory-bound and cheaper per batch step but costlier per
token; 5x is an estimate for a 7-8B model at moderate batch, not a profile). A request's
output length is known once it completes; until then the running mean of completed outputs
(``default_output_tokens`` before any) stands in. Costs are divided by the replica's
``weight`` (relative capacity) so a faster replica looks proportionally less loaded.
Left out: Preble's post-assignment rebalancing, prefix autoscaling and its local scheduler.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from placement.errors import InputError
from placement.routing.base import Pipeline, ReplicaView
from placement.routing.filters import HealthFilter, ModelFilter
from placement.routing.prefix_index import PrefixIndex, kv_capacity_blocks

if TYPE_CHECKING:
    from placement.routing.policies.context import PolicyContext

DEFAULT_WINDOW_S = 180.0
DEFAULT_PREFILL_TOKEN_COST = 1.0
DEFAULT_DECODE_TOKEN_COST = 5.0
DEFAULT_OUTPUT_TOKENS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class PrebleConfig:
    """History window (s), per-token work of prefill and decode, and the output length
    assumed before any request has completed."""

    window_s: float = DEFAULT_WINDOW_S
    prefill_token_cost: float = DEFAULT_PREFILL_TOKEN_COST
    decode_token_cost: float = DEFAULT_DECODE_TOKEN_COST
    default_output_tokens: int = DEFAULT_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        if not self.window_s > 0:
            raise InputError(f"got {self.window_s}", field="preble.window_s", expected="> 0")
        for field in ("prefill_token_cost", "decode_token_cost", "default_output_tokens"):
            value = getattr(self, field)
            if value < 0:
                raise InputError(f"got {value}", field=f"preble.{field}", expected=">= 0")


class _RoutedRecord:
    __slots__ = ("output_tokens", "prefill_tokens", "replica", "req_id", "routed_s")

    def __init__(self, req_id: int, replica: int, routed_s: float, prefill_tokens: int) -> None:
        self.req_id = req_id
        self.replica = replica
        self.routed_s = routed_s
        self.prefill_tokens = prefill_tokens
        self.output_tokens = -1  # unknown until it completes


class WindowLoad:
    """Work routed to each replica in the last ``window_s`` seconds (Preble's ``L``).

    Per replica: uncached prompt tokens routed, requests routed, and generated tokens of those
    that completed; requests still running are charged the mean output length. Amortised O(1).
    """

    def __init__(self, window_s: float, default_output_tokens: int) -> None:
        self.window_s = window_s
        self._seq = 0
        self._records: dict[int, _RoutedRecord] = {}  # routing seq -> record, window only
        self._latest: dict[int, int] = {}  # req id -> seq of its latest routing in the window
        self._order: dict[int, deque[int]] = {}  # replica -> seqs by routing time
        self._prefill: dict[int, int] = {}
        self._count: dict[int, int] = {}
        self._known_out: dict[int, int] = {}
        self._known_count: dict[int, int] = {}
        self._out_sum = 0
        self._out_n = 0
        self._default_out = default_output_tokens

    @property
    def mean_output_tokens(self) -> float:
        """Mean generated tokens of completed requests (the default before any)."""
        return self._out_sum / self._out_n if self._out_n else float(self._default_out)

    def add(self, req_id: int, replica: int, now: float, prefill_tokens: int) -> None:
        """A request was routed to ``replica`` needing ``prefill_tokens`` uncached tokens."""
        self._seq += 1
        self._records[self._seq] = _RoutedRecord(req_id, replica, now, prefill_tokens)
        self._latest[req_id] = self._seq
        self._order.setdefault(replica, deque()).append(self._seq)
        self._prefill[replica] = self._prefill.get(replica, 0) + prefill_tokens
        self._count[replica] = self._count.get(replica, 0) + 1

    def complete(self, req_id: int, output_tokens: int | None) -> None:
        """A request finished; ``output_tokens`` None when it failed (nothing learnt)."""
        seq = self._latest.pop(req_id, None)
        if output_tokens is None:
            return
        self._out_sum += output_tokens
        self._out_n += 1
        rec = None if seq is None else self._records.get(seq)
        if rec is not None:
            rec.output_tokens = output_tokens
            r = rec.replica
            self._known_out[r] = self._known_out.get(r, 0) + output_tokens
            self._known_count[r] = self._known_count.get(r, 0) + 1

    def load(self, replica: int, now: float, prefill_cost: float, decode_cost: float) -> float:
        """Prefill plus decode work routed to ``replica`` within the window."""
        self._expire(replica, now)
        count = self._count.get(replica, 0)
        if count == 0:
            return 0.0
        unknown = count - self._known_count.get(replica, 0)
        decode_tokens = self._known_out.get(replica, 0) + unknown * self.mean_output_tokens
        return prefill_cost * self._prefill.get(replica, 0) + decode_cost * decode_tokens

    def _expire(self, replica: int, now: float) -> None:
        order = self._order.get(replica)
        horizon = now - self.window_s
        while order and self._records[order[0]].routed_s < horizon:
            seq = order.popleft()
            rec = self._records.pop(seq)
            if self._latest.get(rec.req_id) == seq:
                del self._latest[rec.req_id]
            self._prefill[replica] -= rec.prefill_tokens
            self._count[replica] -= 1
            if rec.output_tokens >= 0:
                self._known_out[replica] -= rec.output_tokens
                self._known_count[replica] -= 1


class E2Picker:
    """Exploit the longest cached prefix when it dominates the prompt, else explore L + M + P."""

    name = "preble-e2-picker"

    def __init__(self, config: PrebleConfig, block_tokens: int) -> None:
        self.config = config
        self.block_tokens = block_tokens
        self.index = PrefixIndex(kv_capacity_blocks(block_tokens), hit_window_s=config.window_s)
        self.window = WindowLoad(config.window_s, config.default_output_tokens)
        self.last_branch = ""  # "exploit" or "explore": which rule decided the last pick

    def matched_tokens(self, req: Request, matched_blocks: int) -> int:
        """Prompt tokens covered by a cached prefix of ``matched_blocks`` blocks."""
        return min(matched_blocks * req.block_tokens, req.input_tokens)

    def load(self, replica: ReplicaView, now: float) -> float:
        """Preble's ``L`` for one replica."""
        cfg = self.config
        return self.window.load(replica.index, now, cfg.prefill_token_cost, cfg.decode_token_cost)

    def eviction_cost(self, replica: ReplicaView, new_tokens: int, now: float) -> float:
        """Preble's ``M``: recompute work of the blocks LRU would evict to fit ``new_tokens``."""
        cache = self.index.cache(replica.index)
        if cache is None:
            return 0.0
        need = -(-new_tokens // self.block_tokens)
        to_evict = need - (cache.capacity_blocks - len(cache))
        if to_evict <= 0:
            return 0.0
        horizon = now - self.config.window_s
        hits = 0
        for _, (last, n) in islice(cache.coldest(), to_evict):
            if last >= horizon:
                hits += n
        return self.config.prefill_token_cost * self.block_tokens * hits

    def pick(self, req: Request, candidates: list[ReplicaView], scores: list[float]) -> ReplicaView:
        now = req.arrival_s
        matched = self.index.match_all(req.block_hashes, now)
        tokens = {c.index: self.matched_tokens(req, matched.get(c.index, 0)) for c in candidates}
        best = max(tokens.values())
        if best > req.input_tokens - best:
            self.last_branch = "exploit"
            holders = [c for c in candidates if tokens[c.index] == best]
            return min(holders, key=lambda c: (_per_capacity(self.load(c, now), c), c.index))
        self.last_branch = "explore"
        cost_per_token = self.config.prefill_token_cost

        def total_cost(c: ReplicaView) -> tuple[float, int]:
            new_tokens = req.input_tokens - tokens[c.index]
            work = (
                self.load(c, now)
                + self.eviction_cost(c, new_tokens, now)
                + cost_per_token * new_tokens
            )
            return _per_capacity(work, c), c.index

        return min(candidates, key=total_cost)

    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None:
        cached = self.matched_tokens(req, self.index.match(replica.index, req.block_hashes, now))
        self.window.add(req.id, replica.index, now, req.input_tokens - cached)
        self.index.insert(replica, req.block_hashes, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.window.complete(req.id, req.output_tokens if req.first_token_s >= 0 else None)


def _per_capacity(work: float, replica: ReplicaView) -> float:
    """Work in units of the replica's relative capacity (a zero-capacity replica: infinite)."""
    return work / replica.weight if replica.weight > 0 else math.inf


def build(ctx: PolicyContext) -> Pipeline:
    """Preble's E2 scheduler with ``ctx.preble`` parameters."""
    return Pipeline(
        "preble_e2",
        filters=[ModelFilter(), HealthFilter()],
        picker=E2Picker(ctx.preble, ctx.block_tokens),
    )
