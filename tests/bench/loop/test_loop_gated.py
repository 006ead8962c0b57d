"""A peer behind our SLO gate (bench.loop.gated): a request the gate refused and a
flow-control queue tries again is a retry: one shed request, however many tries."""

from __future__ import annotations

from collections.abc import Sequence

from bench.loop.gated import Gated
from placement.domain.requests import DEFAULT_CLASSES, Request
from serving.admission.slo_gate import SloGate
from sim.router import ReplicaView


class _First:
    name = "first"

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        return 0

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        pass

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        pass


def test_a_request_tried_again_is_shed_once() -> None:
    view = ReplicaView(
        0, "l40s-0", model="llama-3-8b", accelerator="L40S", kv_capacity_tokens=10**6
    )
    view.outstanding_prefill_tokens = 400_000  # minutes of prompts queued ahead
    gate = SloGate(DEFAULT_CLASSES)
    gated = Gated(_First(), gate)
    req = Request(1, 0.0, 2_000, 50, model="llama-3-8b")
    assert gated.route(req, [view], 0.0) == -1
    assert gated.shed == 1 and gate.refused[("default", "interactive")] == 1
    for i in range(1, 40):
        assert gated.route(req, [view], i * 0.02) == -1
    assert gated.shed == 1 and gate.refused[("default", "interactive")] == 1
    # once the queue ahead is gone it is admitted, and a new request is a first try again
    view.outstanding_prefill_tokens = 0
    assert gated.route(req, [view], 1.0) == 0
    other = Request(2, 1.0, 2_000, 50, model="llama-3-8b")
    view.outstanding_prefill_tokens = 400_000
    assert gated.route(other, [view], 1.1) == -1
    assert gated.shed == 2 and gate.refused[("default", "interactive")] == 2
