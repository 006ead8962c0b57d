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
from typing import TYPE_CHECKING

from placement.domain.prefix_index import PrefixIndex, kv_capacity_blocks
from placement.domain.requests import Request
from placement.errors import InputError
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext

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
    __slots__ = ("output_tokens", "prefill_tokens", "req_id", "routed_s")

    def __init__(self, req_id: int, routed_s: float, prefill_tokens: int) -> None:
        self.req_id = req_id
        self.routed_s = routed_s
        self.prefill_tokens = prefill_tokens
        self.output_tokens = -1  # unknown until it completes


class _ReplicaWindow:
    """One replica's requests routed within the window, oldest first, and their sums."""

    __slots__ = ("count", "known_count", "known_output", "prefill", "records")

    def __init__(self) -> None:
        self.records: deque[_RoutedRecord] = deque()
        self.prefill = 0  # uncached prompt tokens
        self.count = 0
        self.known_output = 0  # generated tokens of the completed ones
        self.known_count = 0


class WindowLoad:
    """Work routed to each replica in the last ``window_s`` seconds (Preble's ``L``).

    Per replica: uncached prompt tokens routed, requests routed, and generated tokens of those
    that completed; requests still running are charged the mean output length. Amortised O(1).
    """

    def __init__(self, window_s: float, default_output_tokens: int) -> None:
        self.window_s = window_s
        self._windows: dict[int, _ReplicaWindow] = {}
        self._latest: dict[int, tuple[_ReplicaWindow, _RoutedRecord]] = {}  # by req id
        self._out_sum = 0
        self._out_n = 0
        self._default_out = default_output_tokens

    @property
    def mean_output_tokens(self) -> float:
        """Mean generated tokens of completed requests (the default before any)."""
        return self._out_sum / self._out_n if self._out_n else float(self._default_out)

    def add(self, req_id: int, replica: int, now: float, prefill_tokens: int) -> None:
        """A request was routed to ``replica`` needing ``prefill_tokens`` uncached tokens."""
        w = self._windows.get(replica)
        if w is None:
            w = self._windows[replica] = _ReplicaWindow()
        rec = _RoutedRecord(req_id, now, prefill_tokens)
        w.records.append(rec)
        w.prefill += prefill_tokens
        w.count += 1
        self._latest[req_id] = (w, rec)

    def complete(self, req_id: int, output_tokens: int | None) -> None:
        """A request finished; ``output_tokens`` None when it failed (nothing learnt)."""
        latest = self._latest.pop(req_id, None)
        if output_tokens is None:
            return
        self._out_sum += output_tokens
        self._out_n += 1
        if latest is not None:
            w, rec = latest
            rec.output_tokens = output_tokens
            w.known_output += output_tokens
            w.known_count += 1

    def load(self, replica: int, now: float, prefill_cost: float, decode_cost: float) -> float:
        """Prefill plus decode work routed to ``replica`` within the window."""
        w = self._windows.get(replica)
        if w is None:
            return 0.0
        records = w.records
        horizon = now - self.window_s
        while records and records[0].routed_s < horizon:
            rec = records.popleft()
            latest = self._latest.get(rec.req_id)
            if latest is not None and latest[1] is rec:
                del self._latest[rec.req_id]
            w.prefill -= rec.prefill_tokens
            w.count -= 1
            if rec.output_tokens >= 0:
                w.known_output -= rec.output_tokens
                w.known_count -= 1
        if w.count == 0:
            return 0.0
        decode_tokens = w.known_output + (w.count - w.known_count) * self.mean_output_tokens
        return prefill_cost * w.prefill + decode_cost * decode_tokens


class E2Picker:
    """Exploit the longest cached prefix when it dominates the prompt, else explore L + M + P.

    A picker is given no clock: ``pick`` takes the request's arrival time as now (for the
    load window and hit recency); the hooks use the caller's ``now``.
    """

    name = "preble-e2-picker"

    def __init__(self, config: PrebleConfig, block_tokens: int) -> None:
        self.config = config
        self.block_tokens = block_tokens
        self.index: PrefixIndex[ReplicaView] = PrefixIndex(
            kv_capacity_blocks(block_tokens), hit_window_s=config.window_s
        )
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
        hits = cache.recent_hits_of_coldest(to_evict, now - self.config.window_s)
        return self.config.prefill_token_cost * self.block_tokens * hits

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        matched = self.index.match_all(req.block_hashes, now)
        tokens: dict[int, int] = {}
        for c in candidates:
            m = matched.get(c.index)
            tokens[c.index] = 0 if m is None else self.matched_tokens(req, m)
        best = max(tokens.values())
        if best > req.input_tokens - best:
            self.last_branch = "exploit"
            holders = [c for c in candidates if tokens[c.index] == best]
            return min(holders, key=lambda c: (_per_capacity(self.load(c, now), c), c.index))
        self.last_branch = "explore"
        return self._explore(req, candidates, tokens, now)

    def _explore(
        self, req: Request, candidates: list[ReplicaView], cached: dict[int, int], now: float
    ) -> ReplicaView:
        """argmin of (L + M + P) / weight, ties to the lowest index.

        M ≥ 0, so (L + P) / weight bounds each total from below: candidates are priced in order
        of that bound and the costlier eviction walk stops once no bound can beat the best.
        """
        cost_per_token = self.config.prefill_token_cost
        bounded = []
        for c in candidates:
            new_tokens = req.input_tokens - cached[c.index]
            work = self.load(c, now) + cost_per_token * new_tokens
            bounded.append((_per_capacity(work, c), c.index, work, new_tokens, c))
        bounded.sort(key=lambda row: (row[0], row[1]))
        best_key = (math.inf, -1)
        best = bounded[0][4]
        for bound, idx, work, new_tokens, c in bounded:
            if (bound, idx) >= best_key:
                break
            total = _per_capacity(work + self.eviction_cost(c, new_tokens, now), c)
            if (total, idx) < best_key:
                best_key, best = (total, idx), c
        return best

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
    """Preble's E2 scheduler with ``settings["preble_e2"]`` parameters."""
    return Pipeline(
        "preble_e2",
        filters=[ModelFilter(), HealthFilter()],
        picker=E2Picker(ctx.settings_for("preble_e2", PrebleConfig), ctx.block_tokens),
    )
