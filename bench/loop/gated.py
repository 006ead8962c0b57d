"""A peer policy behind the same admission gate as ours, to separate admission from placement.

The gate judges the replica the peer chose exactly as it judges ours
(:class:`serving.admission.slo_gate.SloGate`): the route path's predicted TTFT for it
(:mod:`serving.route.ttft`: own prefill plus the router's queued prompt tokens on that replica
over its prefill rate; the peer's own counters, no prefix discount), calibrated on that
replica's first tokens, and the TPOT the request would see there. What this variant gains
over the bare peer is admission's share of our lead; what ours still gains over it is
placement's. The peer keeps its choice: the gate's second look belongs to our route path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from placement.domain.requests import Request
from serving.admission.slo_gate import SloGate
from serving.route.ttft import prefill_table
from serving.route.types import ReplicaState, RouteQuery
from sim.router import ReplicaView, RoutingPolicy


class Gated:
    def __init__(
        self,
        inner: RoutingPolicy,
        gate: SloGate,
        *,
        budget: Callable[[Request, float], float | None] | None = None,
    ) -> None:
        """``budget``: the time a request still has for its first token (None: its class's
        SLO), for requests that waited in a flow-control queue."""
        self.inner = inner
        self.gate = gate
        self.budget = budget
        self.name = f"{inner.name}+gate"
        self.shed = 0
        self._states: dict[str, ReplicaState] = {}
        self._queries: dict[int, RouteQuery] = {}
        # requests the gate refused that may come back (from a flow-control queue): tried
        # again, they are retries, not refused (or shed) again
        self._refused: set[int] = set()

    def _state(self, v: ReplicaView) -> ReplicaState:
        """The router-side view of ``v`` as the gate reads it (the peer's own counters)."""
        state = self._states.get(v.id)
        if state is None:
            state = self._states[v.id] = ReplicaState(
                id=v.id,
                address=v.id,
                model=v.model,
                accelerator=v.accelerator,
                tp=v.tp,
                kv_capacity_tokens=v.kv_capacity_tokens,
            )
        state.in_flight = v.outstanding
        state.in_flight_prefill_tokens = v.outstanding_prefill_tokens
        state.num_requests_running = v.num_running
        state.num_requests_waiting = v.num_waiting
        state.kv_cache_usage_perc = v.kv_usage
        return state

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        i = self.inner.route(req, replicas, now)
        if i < 0:
            return i
        v = replicas[i]
        state = self._state(v)
        budget = self.budget(req, now) if self.budget is not None else None
        query = RouteQuery(
            tenant=req.tenant,
            model=v.model,
            request_class=req.request_class,
            block_hashes=req.block_hashes,
            input_tokens=req.input_tokens,
            max_output_tokens=req.output_tokens,
            ttft_budget_s=budget,
        )
        table = prefill_table(v.accelerator, v.model, v.tp)
        predicted = table.ttft(req.input_tokens, v.outstanding_prefill_tokens)
        seen = self.gate.forecast_on(state, v.id, predicted, query, now)
        retry = req.id in self._refused
        # judged by the pool of the replica's model, as ours is (the gate's overload signals)
        judged = self.gate.judge(
            req.tenant, req.request_class, seen, now, budget, retry=retry, model=query.model
        )
        if not judged:
            if not retry:
                self.shed += 1
                self._refused.add(req.id)
            # the peer counted the request as sent: settle its books as a refused connection
            self.inner.on_complete(req, v, now)
            return -1
        self._refused.discard(req.id)
        self.gate.dispatched(v.id, query, now, seen, state=state)
        self._queries[req.id] = query
        return i

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.inner.on_first_token(req, replica, now)
        query = self._queries.get(req.id)
        if query is not None:
            self.gate.first_token(query, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.inner.on_complete(req, replica, now)
        query = self._queries.pop(req.id, None)
        self.gate.finished(req.tenant, 0 if req.error else req.output_tokens, query, now)
