"""Contracts of the route path: what a router sees of a replica, and the plugin shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from placement.domain.requests import Request


class ReplicaView:
    """What a router knows of one replica.

    Two kinds of fields: the router's own counters (exact, updated as it routes and as responses
    stream back) and the replica's metrics as of the last scrape of its ``/metrics`` (stale by
    up to one scrape interval). Nothing else of the engine is visible.
    """

    __slots__ = (
        "accelerator",
        "adapters",
        "block_tokens",
        "decoding",
        "healthy",
        "id",
        "index",
        "kv_capacity_tokens",
        "kv_usage",
        "loading",
        "max_loras",
        "model",
        "num_running",
        "num_waiting",
        "outstanding",
        "outstanding_prefill_tokens",
        "prefix_hit_rate",
        "running_adapters",
        "scraped_at_s",
        "tp",
        "waiting_adapters",
        "weight",
    )

    def __init__(
        self,
        index: int,
        id: str,
        *,
        model: str,
        accelerator: str,
        kv_capacity_tokens: int,
        block_tokens: int = 16,
        weight: float = 1.0,
        max_loras: int = 0,
        tp: int = 1,
    ) -> None:
        self.index = index
        self.id = id
        self.model = model
        self.accelerator = accelerator
        self.kv_capacity_tokens = kv_capacity_tokens
        self.block_tokens = block_tokens
        self.weight = weight  # relative capacity (e.g. from the cost model); 1.0 when unknown
        self.max_loras = max_loras  # LoRA adapter slots (vLLM --max-loras; 0: none)
        self.tp = tp  # tensor-parallel degree (GPUs per replica), as the replica registered
        self.healthy = True
        self.loading = False  # changing base model (draining, then loading): takes nothing
        # the router's own counters
        self.outstanding = 0  # requests sent and not yet finished
        self.outstanding_prefill_tokens = 0  # input tokens of requests with no first token yet
        self.decoding = 0  # requests with a first token, not yet finished
        # scraped metrics (vLLM names: num_requests_running/waiting, kv_cache_usage_perc)
        self.num_running = 0
        self.num_waiting = 0
        self.kv_usage = 0.0
        self.prefix_hit_rate = 0.0
        # LoRA adapters with running or waiting requests (vLLM's lora_requests_info metric:
        # running_lora_adapters, then waiting_lora_adapters), and each list apart
        self.adapters: tuple[str, ...] = ()
        self.running_adapters: tuple[str, ...] = ()
        self.waiting_adapters: tuple[str, ...] = ()
        self.scraped_at_s = 0.0

    def __repr__(self) -> str:
        return f"ReplicaView({self.index}, {self.id!r}, outstanding={self.outstanding})"


@runtime_checkable
class RoutingPolicy(Protocol):
    """Anything that can route: returns the chosen replica's ``index``, or -1 to refuse.

    The hooks let stateful policies track their own view (what they sent where); the caller
    invokes them in time order.
    """

    name: str

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int: ...

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None: ...

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None: ...


# routes one request now and sends it to its replica: False when the policy refuses it
Place = Callable[[Request, float], bool]


class Holding(Protocol):
    """Where requests wait that the fleet cannot take yet (the gateway's flow control).

    The simulator hands each arrival to :meth:`arrive` instead of routing it itself; the
    holding places it at once or keeps it (and sets ``req.error`` when it refuses it for good).
    :meth:`pump` is called after every engine step and at every scrape while :meth:`busy`.
    """

    def arrive(self, req: Request, now: float, place: Place) -> None: ...

    def pump(self, now: float, place: Place) -> None: ...

    def busy(self) -> bool: ...


class Filter(Protocol):
    """Narrows the candidates; returns a sub-list (possibly the same list)."""

    name: str

    def filter(
        self, req: Request, candidates: list[ReplicaView], now: float
    ) -> list[ReplicaView]: ...


class Scorer(Protocol):
    """Grades each candidate in [0, 1], higher is better."""

    name: str

    def score(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]: ...


class Picker(Protocol):
    """Chooses one candidate given the weighted total score of each."""

    name: str

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView: ...


class _Observer(Protocol):
    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None: ...


class Pipeline:
    """filters → weighted scorers → picker, the Kubernetes-scheduling shape.

    Plugins that keep state (what was sent where) may define ``on_routed``,
    ``on_first_token`` and ``on_complete``; the pipeline forwards each call to them.
    """

    def __init__(
        self,
        name: str,
        *,
        filters: Sequence[Filter] = (),
        scorers: Sequence[tuple[Scorer, float]] = (),
        picker: Picker,
    ) -> None:
        self.name = name
        self.filters = list(filters)
        self.scorers = list(scorers)
        self.picker = picker
        plugins: list[object] = [*self.filters, *(s for s, _ in self.scorers), self.picker]
        self._on_routed = [p.on_routed for p in plugins if hasattr(p, "on_routed")]
        self._on_first = [p.on_first_token for p in plugins if hasattr(p, "on_first_token")]
        self._on_complete = [p.on_complete for p in plugins if hasattr(p, "on_complete")]

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        candidates = list(replicas)
        for f in self.filters:
            candidates = f.filter(req, candidates, now)
            if not candidates:
                return -1
        if len(candidates) == 1:
            chosen = candidates[0]
        else:
            chosen = self.picker.pick(req, candidates, self._total(req, candidates, now), now)
        for hook in self._on_routed:
            hook(req, chosen, now)
        return chosen.index

    def _total(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        """Weighted sum of the scorers' grades (one list pass per scorer; on the hot path)."""
        total: list[float] | None = None
        for scorer, weight in self.scorers:
            grades = scorer.score(req, candidates, now)
            if total is None:
                total = grades if weight == 1.0 else [weight * g for g in grades]
            else:
                total = [t + weight * g for t, g in zip(total, grades, strict=True)]
        return total if total is not None else [0.0] * len(candidates)

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        for hook in self._on_first:
            hook(req, replica, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        for hook in self._on_complete:
            hook(req, replica, now)
