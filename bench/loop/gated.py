"""A peer policy behind the same admission gate as ours, to separate admission from placement.

The gate judges the replica the peer chose with the predicted TTFT the route path would compute
for it (:mod:`serving.route.ttft`: own prefill plus the router's queued prompt tokens on that
replica over its prefill rate; the peer's own counters, no prefix discount). What this variant
gains over the bare peer is admission's share of our lead; what ours still gains over it is
placement's.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.domain.requests import Request
from serving.admission.slo_gate import SloGate
from serving.route.ttft import PrefillTable, prefill_table
from sim.router import ReplicaView, RoutingPolicy


class Gated:
    def __init__(self, inner: RoutingPolicy, gate: SloGate) -> None:
        self.inner = inner
        self.gate = gate
        self.name = f"{inner.name}+gate"
        self.shed = 0
        self._tables: dict[str, PrefillTable] = {}

    def _table(self, v: ReplicaView) -> PrefillTable:
        table = self._tables.get(v.id)
        if table is None:
            table = self._tables[v.id] = prefill_table(v.accelerator, v.model, 1)
        return table

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        i = self.inner.route(req, replicas, now)
        if i < 0:
            return i
        v = replicas[i]
        ttft = self._table(v).ttft(req.input_tokens, v.outstanding_prefill_tokens)
        if not self.gate.admit(req.tenant, req.request_class, ttft):
            self.shed += 1
            # the peer counted the request as sent: settle its books as a refused connection
            self.inner.on_complete(req, v, now)
            return -1
        self.gate.started(req.tenant, req.input_tokens)
        return i

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.inner.on_first_token(req, replica, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.inner.on_complete(req, replica, now)
        self.gate.finished(req.tenant, 0 if req.error else req.output_tokens)
