"""``placement``: the service's own route path (:mod:`serving.route`), run in the simulator.

The very code that serves HTTP decides here: this adapter mirrors the simulator's
:class:`ReplicaView` objects into :class:`~serving.route.types.ReplicaState` (health at every
decision; scraped metrics when a new scrape has landed), turns each :class:`Request` into a
:class:`~serving.route.types.RouteQuery`, and forwards the dispatch, first-token and completion
hooks so the route path keeps its own in-flight counts and prefix index.

With no plan (``PolicyContext.plan`` None) every decision takes the profile's no-plan fallback,
the greedy cache-and-load score; a closed-loop benchmark passes a solved plan in the context.
A request with no model name goes to the pool of the fleet's first replica. Replica views carry
no tensor-parallel degree, so the predicted-TTFT table assumes TP 1 (a kind that does not fit
one GPU gets the generic table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from placement.routing.base import ReplicaView

if TYPE_CHECKING:
    from placement.routing.policies.context import PolicyContext
    from serving.route import PlacementRoutePath, ReplicaState, RouteQuery


class PlacementPolicy:
    name = "placement"

    def __init__(self, path: PlacementRoutePath) -> None:
        self.path = path
        self._states: list[ReplicaState] = []
        self._index: dict[str, int] = {}
        self._queries: dict[int, RouteQuery] = {}
        self._default_model = ""

    def _register(self, replicas: Sequence[ReplicaView]) -> None:
        from serving.route import ReplicaState

        self._states = [
            ReplicaState(
                id=v.id,
                address=v.id,
                model=v.model,
                accelerator=v.accelerator,
                tp=1,
                kv_capacity_tokens=v.kv_capacity_tokens,
                scraped_at=-1.0,
            )
            for v in replicas
        ]
        self._index = {v.id: v.index for v in replicas}
        self._default_model = replicas[0].model if replicas else ""
        self.path.set_replicas(self._states)

    def _sync(self, replicas: Sequence[ReplicaView]) -> None:
        for v, s in zip(replicas, self._states, strict=True):
            s.healthy = v.healthy
            if v.scraped_at_s != s.scraped_at:
                s.scraped_at = v.scraped_at_s
                s.num_requests_running = v.num_running
                s.num_requests_waiting = v.num_waiting
                s.kv_cache_usage_perc = v.kv_usage

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        from serving.route import NoReplica, RouteQuery

        if len(self._states) != len(replicas):
            self._register(replicas)
        self._sync(replicas)
        query = RouteQuery(
            tenant=req.tenant,
            model=req.model or self._default_model,
            request_class=req.request_class,
            block_hashes=req.block_hashes,
            input_tokens=req.input_tokens,
            max_output_tokens=req.output_tokens,
        )
        try:
            decision = self.path.decide(query, now)
        except NoReplica:
            return -1
        self.path.on_dispatch(decision, query, now)
        self._queries[req.id] = query
        return self._index[decision.replica_id]

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        query = self._queries.get(req.id)
        if query is not None:
            self.path.on_first_token(replica.id, query, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        query = self._queries.pop(req.id, None)
        if query is not None:
            self.path.on_complete(replica.id, query, now, ok=not req.error)


def build(ctx: PolicyContext) -> PlacementPolicy:
    """The route path with ``ctx.route_profile`` (default profile when None), its prefix
    block size set to ``ctx.block_tokens``, and ``ctx.plan`` installed."""
    from serving.route import PlacementRoutePath, load_profile

    profile = dataclasses.replace(load_profile(ctx.route_profile), block_tokens=ctx.block_tokens)
    path = PlacementRoutePath(profile=profile)
    path.install_plan(ctx.plan)
    return PlacementPolicy(path)
