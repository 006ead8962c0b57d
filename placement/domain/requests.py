"""Tenants, request classes and requests: who asks, with which SLOs, for what."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestClass:
    """A class of service. SLOs are on p95 TTFT and on TPOT (seconds)."""

    name: str
    priority: int
    ttft_slo_s: float
    tpot_slo_s: float
    sheddable: bool


INTERACTIVE = RequestClass(
    name="interactive", priority=0, ttft_slo_s=2.0, tpot_slo_s=0.100, sheddable=False
)
BATCH = RequestClass(name="batch", priority=1, ttft_slo_s=30.0, tpot_slo_s=0.300, sheddable=True)
DEFAULT_CLASSES: dict[str, RequestClass] = {c.name: c for c in (INTERACTIVE, BATCH)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """Who pays. ``credit_share`` is the guaranteed share of fleet capacity (0..1)."""

    name: str
    credit_share: float = 1.0
    burst_cap: float = 1.0
    weight: float = 1.0


class Request:
    """One inference request in the simulator, with its outcome filled in as it is served.

    Plain ``__slots__`` class rather than a dataclass: a million of these are created per
    benchmark run and the constructor is on the hot path.
    """

    __slots__ = (
        "adapter",
        "arrival_s",
        "backlog_prefill_tokens",
        "backlog_requests",
        "block_hashes",
        "block_tokens",
        "cached_tokens",
        "error",
        "finish_s",
        "first_token_s",
        "id",
        "input_tokens",
        "model",
        "output_tokens",
        "preemptions",
        "priority",
        "replica",
        "request_class",
        "slot_wait_s",
        "tenant",
    )

    def __init__(
        self,
        id: int,
        arrival_s: float,
        input_tokens: int,
        output_tokens: int,
        *,
        tenant: str = "default",
        request_class: str = "interactive",
        model: str = "",
        block_hashes: tuple[int, ...] = (),
        block_tokens: int = 512,
        adapter: str = "",
    ) -> None:
        self.id = id
        self.arrival_s = arrival_s
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.tenant = tenant
        self.request_class = request_class
        self.model = model
        self.block_hashes = block_hashes
        self.block_tokens = block_tokens
        self.adapter = adapter  # a LoRA adapter on ``model`` ("": the base model itself)
        # the engine's scheduling priority the router set (vLLM ``priority``: lower first; only
        # a replica scheduling by priority reads it)
        self.priority = 0
        # outcome
        self.replica = -1
        self.first_token_s = -1.0
        self.finish_s = -1.0
        self.cached_tokens = 0
        self.preemptions = 0
        self.error = ""  # why it failed, empty when served
        # the router's own counters for the chosen replica when it routed this request
        self.backlog_requests = 0  # requests in flight there
        self.backlog_prefill_tokens = 0  # prompt tokens there still waiting for a first token
        # seconds its turn to be admitted waited for a LoRA slot for its adapter (the engine
        # passed it over because every slot held an adapter in use; 0 with no adapter)
        self.slot_wait_s = 0.0

    def unserved(
        self, *, arrival_s: float | None = None, block_hashes: tuple[int, ...] | None = None
    ) -> Request:
        """The same request, not yet served (no outcome), optionally re-timed or with other
        block hashes."""
        return Request(
            self.id,
            self.arrival_s if arrival_s is None else arrival_s,
            self.input_tokens,
            self.output_tokens,
            tenant=self.tenant,
            request_class=self.request_class,
            model=self.model,
            block_hashes=self.block_hashes if block_hashes is None else block_hashes,
            block_tokens=self.block_tokens,
            adapter=self.adapter,
        )

    def __repr__(self) -> str:
        return (
            f"Request(id={self.id}, arrival_s={self.arrival_s:.3f}, in={self.input_tokens}, "
            f"out={self.output_tokens}, tenant={self.tenant!r}, class={self.request_class!r})"
        )
