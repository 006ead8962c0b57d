"""The gate judges a long prompt by what it costs on the replica (its cached prefix, the queue
ahead), gives a Retry-After that waits out that queue, and tells a prompt no replica can
prefill within the SLO that no retry will (or, with ``best_effort``, serves it late)."""

from __future__ import annotations

import math

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import TTFT, UNREACHABLE, SloGate
from serving.route.ttft import prefill_table
from serving.route.types import ReplicaState, RouteQuery

H100 = prefill_table("H100-SXM", "llama-3-8b", 1)


def _state(queued: int = 0) -> ReplicaState:
    return ReplicaState(
        id="h0",
        address="h0",
        model="llama-3-8b",
        accelerator="H100-SXM",
        tp=1,
        kv_capacity_tokens=400_000,
        in_flight_prefill_tokens=queued,
    )


def _query(tokens: int) -> RouteQuery:
    return RouteQuery(
        tenant="a",
        model="llama-3-8b",
        request_class="interactive",
        block_hashes=(),
        input_tokens=tokens,
        max_output_tokens=1,
    )


def _judge(gate: SloGate, tokens: int, *, cached: int = 0, queued: int = 0) -> bool:
    state = _state(queued)
    predicted = H100.ttft(tokens - cached, queued)
    seen = gate.forecast_on(state, state.id, predicted, _query(tokens), 0.0, cached_tokens=cached)
    return gate.judge("a", "interactive", seen)


def _overload(gate: SloGate) -> None:
    for _ in range(300):
        gate.admit("x", "interactive", 5.0)


def test_a_40k_prompt_with_its_prefix_cached_is_admitted_and_refused_behind_a_queue() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert _judge(gate, 40_000, cached=36_000)  # ≥32k, but 4k to compute
    assert _judge(gate, 40_000, cached=36_000, queued=20_000)  # a short queue: still in time
    assert not _judge(gate, 40_000, cached=36_000, queued=200_000)  # seconds of queue
    assert gate.last.rule == TTFT and not gate.last.best_effort


def test_retry_after_waits_out_the_queue_ahead_not_the_whole_ttft() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    assert not _judge(gate, 20_000, queued=200_000)
    seen = gate.last.forecast
    assert seen is not None and seen.wait_s is not None and seen.own_s is not None
    assert gate.retry_after_s == math.ceil(seen.wait_s)
    assert gate.retry_after_s < seen.ttft_s
    # once that queue has drained, the same request on the same replica is admitted
    assert _judge(gate, 20_000)


def test_a_prompt_no_replica_prefills_in_time_is_refused_as_unreachable() -> None:
    gate = SloGate(DEFAULT_CLASSES)
    huge = 200_000  # its own prefill alone takes longer than the 2 s TTFT SLO
    assert H100.prefill(huge) > DEFAULT_CLASSES["interactive"].ttft_slo_s
    assert not _judge(gate, huge)
    assert gate.last.rule == UNREACHABLE
    assert gate.retry_after_s == 1  # no wait would help: the reason says so, not the wait
    # the same prompt is judged by its own SLO in a class with a longer one
    seen = gate.last.forecast
    assert seen is not None
    assert gate.judge("a", "batch", seen)


def test_with_best_effort_it_is_served_late_unless_the_fleet_is_past_capacity() -> None:
    gate = SloGate(DEFAULT_CLASSES, best_effort=True)
    assert _judge(gate, 200_000)
    assert gate.last.best_effort
    _overload(gate)
    assert not _judge(gate, 200_000)
    assert gate.last.rule == UNREACHABLE and not gate.last.best_effort
