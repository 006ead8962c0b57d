"""Flow control in the endpoint picker, over a real gRPC channel: a request admission cannot
place now waits in the flow-control queue (its stream holds its answer, after asking Envoy to
wait that long) until capacity frees, or is refused 429 when its deadline passes; a cancelled
stream leaves the queue at once."""

from __future__ import annotations

import json
from typing import Any

from epp_harness import (
    FULL_DUPLEX,
    RecordingService,
    RunningPicker,
    completion,
    kinds,
    make_service,
    metadata_destination,
    request_body,
    request_headers,
    response_body,
    response_headers,
    wait_until,
)

from serving.epp import PickerConfig
from serving.flow import FlowPolicy

ADDRESSES = [f"127.0.0.1:{8200 + i}" for i in range(2)]


def _full_fleet(**flow: Any) -> tuple[RecordingService, RunningPicker, list[Any]]:
    """A picker with flow control over two replicas that take one request each, both taken
    (their streams held open)."""
    service = make_service(ADDRESSES, in_flight_per_replica=1)
    running = RunningPicker(service, PickerConfig(flow=FlowPolicy(**flow)))
    held = []
    for _ in range(2):
        stream = running.stream()
        stream.send(_headers(), request_body(completion(max_tokens=8)))
        stream.receive(2)  # the destination, then the body handed back
        held.append(stream)
    return service, running, held


def _headers() -> Any:
    return request_headers(request_mode=FULL_DUPLEX, response_mode=FULL_DUPLEX)


def _waiting(running: RunningPicker) -> int:
    room = running.picker.room
    assert room is not None
    return running.on_loop(lambda: room.queue.waiting)


def _count(running: RunningPicker, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples with these labels (whatever the tenant label reads)."""
    registry = running.service.metrics.registry

    def read() -> float:
        return sum(
            sample.value
            for family in registry.collect()
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    return running.on_loop(read)


def _finish(stream: Any) -> None:
    """The held request's response ends: its replica is free again."""
    stream.send(response_headers(200), response_body(b'{"usage": {"completion_tokens": 8}}'))
    stream.receive(2)
    stream.close()


def _override_s(answer: Any) -> float:
    """The message timeout an answer asks Envoy for (it carries nothing else)."""
    assert answer.WhichOneof("response") is None
    return float(answer.override_message_timeout.ToNanoseconds()) / 1e9


def test_a_request_waits_for_capacity_instead_of_a_429() -> None:
    service, running, held = _full_fleet()
    try:
        waiting = running.stream()
        waiting.send(_headers(), request_body(completion(max_tokens=8)))
        # Envoy is asked to wait: up to the request's 2 s TTFT deadline, plus a margin
        (first,) = waiting.receive(1)
        assert 2.0 < _override_s(first) <= 3.0
        assert _waiting(running) == 1  # held, not refused
        assert running.on_loop(lambda: len(service.leases)) == 2
        _finish(held[0])  # capacity frees: the waiting request is placed at once
        answers = waiting.receive(2)
        assert metadata_destination(answers[0]) is not None, kinds(answers)
        assert _waiting(running) == 0
        assert _count(running, "placement_epp_queue_total", outcome="dispatched") == 1
        assert _count(running, "placement_epp_queue_wait_seconds_count", band="0") == 1
        waiting.close()
        held[1].close()
    finally:
        running.stop()


def test_a_request_whose_deadline_passes_while_waiting_is_refused_429() -> None:
    # interactive: TTFT SLO 2 s; a slack of 0.1 makes its deadline 0.2 s after arrival
    _, running, held = _full_fleet(deadline_slack=0.1)
    try:
        waiting = running.stream()
        waiting.send(_headers(), request_body(completion(max_tokens=8)))
        first, answer = waiting.receive(2)  # nothing frees: the 429 comes at the deadline
        assert 1.0 <= _override_s(first) <= 1.2
        assert kinds([answer]) == ["immediate_response"]
        assert answer.immediate_response.status.code == 429
        assert json.loads(answer.immediate_response.body)["error"]["code"] == "rate_limit_exceeded"
        assert _count(running, "placement_epp_deadline_misses_total", band="0") == 1
        waiting.close()
        for stream in held:
            stream.close()
    finally:
        running.stop()


def test_a_cancelled_stream_leaves_the_queue_at_once() -> None:
    service, running, held = _full_fleet()
    try:
        waiting = running.stream()
        waiting.send(_headers(), request_body(completion(max_tokens=8)))
        assert wait_until(lambda: _waiting(running) == 1)
        waiting.cancel()
        assert wait_until(lambda: _waiting(running) == 0, timeout_s=2.0)
        assert _count(running, "placement_epp_queue_total", outcome="client_gone") == 1
        _finish(held[0])  # the freed capacity is not given to the request that left
        assert running.on_loop(lambda: len(service.leases)) == 1
        held[1].close()
    finally:
        running.stop()


def test_without_flow_control_a_full_fleet_refuses_at_once() -> None:
    service = make_service(ADDRESSES, in_flight_per_replica=1)
    running = RunningPicker(service, PickerConfig(flow=FlowPolicy(max_queued=0)))
    try:
        assert running.picker.room is None
        held = []
        for _ in range(2):
            stream = running.stream()
            stream.send(_headers(), request_body(completion()))
            stream.receive(2)
            held.append(stream)
        answers = running.exchange([_headers(), request_body(completion())])
        assert answers[-1].immediate_response.status.code == 429
        for stream in held:
            stream.close()
    finally:
        running.stop()
