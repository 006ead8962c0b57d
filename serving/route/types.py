"""The route path's contract: what a router asks, what it is told, and the state it reads.

Shared by the route path (:mod:`serving.route`), the HTTP API (:mod:`serving.api`) and the
simulator's ``placement`` policy, so each decides with the very same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from placement.errors import PlacementError
from placement.plan import Plan


class NoReplica(PlacementError):
    """Nothing can serve the request (no healthy replica runs its model): HTTP 503."""


class UnservedModel(NoReplica):
    """No replica of the request's model is registered at all: HTTP 404 (a client error,
    unlike a model whose replicas are all unhealthy for now)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteQuery:
    """One request to place. ``block_hashes`` are the prompt's chained prefix block hashes
    (:mod:`placement.domain.prefix`), deepest last."""

    tenant: str
    model: str
    request_class: str
    block_hashes: tuple[int, ...]
    input_tokens: int
    max_output_tokens: int
    # the time left for its first token, when it is not its class's TTFT SLO: a request that
    # waited in the gateway's flow-control queue has only what remains before its deadline
    ttft_budget_s: float | None = None
    adapter: str = ""  # a LoRA adapter on ``model`` ("": the base model)
    # the engine scheduling priority it is sent with (vLLM ``priority``: lower served first;
    # :mod:`serving.admission.engine_priority`); read only where the replicas schedule by it
    priority: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Where a request goes and why. ``reason`` is ``plan`` or ``fallback:<why>``;
    ``fallbacks`` are further replica ids in the order a proxy should try them."""

    replica_id: str
    address: str
    reason: str
    plan_version: int | None
    predicted_ttft_s: float
    fallbacks: tuple[str, ...] = ()
    # prompt tokens the route path expects cached on the replica (what the TTFT discounts)
    cached_tokens: int = 0
    # seconds it would wait there for a LoRA adapter slot before its prefill starts
    # (:mod:`serving.route.adapter_slots`; not in ``predicted_ttft_s``), at the recent rate at
    # which its slots were released, and the slot handovers it waits for (0: it need not wait)
    slot_wait_s: float = 0.0
    slot_handovers: int = 0


@dataclass(slots=True, kw_only=True)
class ReplicaState:
    """Live state of one registered replica. Written by single writers (the scraper, the
    dispatch/outcome hooks) as plain attribute stores; read by the route path without locks."""

    id: str
    address: str
    model: str
    accelerator: str
    tp: int
    kv_capacity_tokens: int
    healthy: bool = True
    in_flight: int = 0  # the router's own count of requests dispatched and not completed
    in_flight_prefill_tokens: int = 0  # prompt tokens dispatched and not yet past first token
    # the router's own moving average of the time per output token of requests completed here
    # (first token to completion over the tokens after the first); 0 when nothing is in flight
    tpot_s: float = 0.0
    # as of the last scrape of the replica's vLLM /metrics
    num_requests_running: float = 0.0
    num_requests_waiting: float = 0.0
    kv_cache_usage_perc: float = 0.0
    scraped_at: float = -1.0
    labels: dict[str, str] = field(default_factory=dict)
    max_loras: int = 0  # LoRA adapter slots (vLLM --max-loras)
    # the adapters its engine lists with requests running, and with requests waiting and none
    # running, as of the last scrape (vLLM's ``vllm:lora_requests_info``: running_lora_adapters,
    # waiting_lora_adapters; waiting in the engine's queue order; None: not scraped)
    running_lora_adapters: tuple[str, ...] | None = None
    waiting_lora_adapters: tuple[str, ...] = ()
    # of the requests in flight, those waiting for a LoRA adapter slot and their prompt tokens
    # (the route path's own book, :mod:`serving.route.adapter_slots`): the replica's scheduler
    # lets others pass them, so they are not queued ahead of a new request
    slot_waiting_requests: int = 0
    slot_waiting_tokens: int = 0
    # since when the adapters now waiting for a LoRA slot there have waited (inf: none waits),
    # and their tenants (:meth:`serving.route.adapter_slots.SlotBook.starved`)
    slot_starved_since: float = float("inf")
    slot_starved_tenants: tuple[str, ...] = ()
    # the price of one scraped waiting request, in uncached prompt tokens (the route path's own
    # moving mean of what it dispatched here, :mod:`serving.route.waiting_queue`), over
    # ``prompts_priced`` dispatches (0: none priced yet, the constant prices it)
    waiting_prompt_tokens: float = 0.0
    prompts_priced: int = 0
    # first tokens the route path has seen from this replica, and their count when the scraper
    # last read its gauges: those since have left the scraped waiting queue
    first_tokens: int = 0
    first_tokens_at_scrape: int = 0
    # of the prompt tokens in flight not yet past their first token, those of each engine
    # priority (kept only by a route path whose replicas schedule by priority): a new request
    # waits behind those of its priority or better alone
    prefill_tokens_by_priority: dict[int, int] = field(default_factory=dict)


class RoutePath(Protocol):
    """What the API and the simulator need from the route path."""

    def install_plan(self, plan: Plan | None) -> None:
        """Swap in a new plan (or none) atomically: one reference assignment."""

    def decide(self, query: RouteQuery, now: float) -> Decision:
        """Decide one request; raises :class:`NoReplica` when nothing can serve it."""

    def fastest(
        self,
        query: RouteQuery,
        now: float,
        *,
        max_tpot_s: float = float("inf"),
        accept: Callable[[ReplicaState], bool] | None = None,
    ) -> Decision | None:
        """The eligible replica with the least predicted TTFT for ``query`` among those whose
        observed TPOT is at most ``max_tpot_s`` and that ``accept`` accepts (the admission
        gate's second look); None when none qualifies."""

    def on_dispatch(self, decision: Decision, query: RouteQuery, now: float) -> None:
        """The request was sent to ``decision.replica_id``: count it in flight."""

    def on_first_token(self, replica_id: str, query: RouteQuery, now: float) -> None:
        """The request's first token arrived: its prompt is no longer waiting."""

    def replica(self, replica_id: str) -> ReplicaState | None:
        """The live state of a registered replica (None when unknown)."""

    def on_complete(
        self,
        replica_id: str,
        query: RouteQuery,
        now: float,
        *,
        ok: bool,
        output_tokens: int | None = None,
    ) -> None:
        """The request finished (or failed): no longer in flight, its prompt no longer waiting
        (whether or not its first token was reported). ``output_tokens`` generated (when known)
        feed the replica's observed TPOT when its first token's time is known."""
