"""The router side of the simulator: what a gateway knows and does, nothing more.

It owns the :class:`ReplicaView` objects a policy sees, keeps its own counters exact as it
routes and as responses stream back (first token, completion), copies replica metrics in at
each scrape, and notices dead replicas the way a proxy does: a failed connection.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.domain.fleet import ReplicaSpec
from placement.domain.requests import Request
from sim.router import ReplicaView, RoutingPolicy


class Gateway:
    def __init__(
        self,
        specs: Sequence[ReplicaSpec],
        policy: RoutingPolicy,
        *,
        weights: Sequence[float] | None = None,
    ) -> None:
        self.policy = policy
        self.views = [
            ReplicaView(
                i,
                s.id,
                model=s.model.name,
                accelerator=s.accelerator.kind,
                kv_capacity_tokens=s.kv_capacity_tokens,
                weight=1.0 if weights is None else weights[i],
                max_loras=s.max_loras,
                tp=s.tp,
            )
            for i, s in enumerate(specs)
        ]
        self.refused = 0
        self.routes_to_dead: list[float] = []  # times a route went to a replica already dead

    def route(self, req: Request, now: float) -> int:
        """Ask the policy; count the request as outstanding on the chosen replica."""
        idx = self.policy.route(req, self.views, now)
        if idx < 0:
            self.refused += 1
            return -1
        v = self.views[idx]
        req.backlog_requests = v.outstanding
        req.backlog_prefill_tokens = v.outstanding_prefill_tokens
        v.outstanding += 1
        v.outstanding_prefill_tokens += req.input_tokens
        req.replica = idx
        return idx

    def connection_failed(self, req: Request, now: float) -> None:
        """The replica refused or reset the connection: mark it down, undo the counters."""
        v = self.views[req.replica]
        v.healthy = False
        self.routes_to_dead.append(now)
        self._forget(req, v, now)

    def reset_in_flight(self, req: Request, now: float) -> None:
        """An in-flight request's replica died under it."""
        v = self.views[req.replica]
        v.healthy = False
        self._forget(req, v, now)

    def requeue(self, req: Request, now: float) -> None:
        """A replica handed back a request (it is changing model): settled as not served, so
        the policy charges and learns nothing from it, and free to be routed again."""
        req.error = "requeued"
        self._forget(req, self.views[req.replica], now)
        req.error = ""
        req.replica = -1

    def _forget(self, req: Request, v: ReplicaView, now: float) -> None:
        """The request is over on ``v`` (finished, failed or reset): settle the counters."""
        v.outstanding -= 1
        if req.first_token_s < 0:
            v.outstanding_prefill_tokens -= req.input_tokens
        else:
            v.decoding -= 1
        self.policy.on_complete(req, v, now)

    # ---- EngineListener ------------------------------------------------------------------
    def on_first_token(self, req: Request, replica: int, now: float) -> None:
        v = self.views[replica]
        v.outstanding_prefill_tokens -= req.input_tokens
        v.decoding += 1
        self.policy.on_first_token(req, v, now)

    def on_complete(self, req: Request, replica: int, now: float) -> None:
        self._forget(req, self.views[replica], now)
