"""The engine priority the service sets goes in the request body through the picker: replaced
in a BUFFERED body's answer (with its Content-Length), streamed back in FULL_DUPLEX_STREAMED;
bodies go untouched when the replicas schedule first come, first served."""

from __future__ import annotations

import json
from typing import Any

import pytest
from epp_harness import (
    BUFFERED,
    FULL_DUPLEX,
    RunningPicker,
    completion,
    kinds,
    make_service,
    request_body,
    request_headers,
    set_headers,
    streamed,
)

from serving.epp import PickerConfig

ADDRESSES = [f"127.0.0.1:{8100 + i}" for i in range(2)]
BATCH = {"x-gateway-inference-objective": "batch"}


def _exchange(mode: int, body: bytes, engine_priority: str | None) -> list[Any]:
    picker = RunningPicker(make_service(ADDRESSES, engine_priority=engine_priority), PickerConfig())
    try:
        return picker.exchange([request_headers(BATCH, request_mode=mode), request_body(body)])
    finally:
        picker.stop()


def _replaced_body(answer: Any) -> bytes | None:
    mutation = answer.request_body.response.body_mutation
    return mutation.body if mutation.WhichOneof("mutation") == "body" else None


@pytest.mark.parametrize("client_priority", [None, 9])
def test_a_buffered_body_is_replaced_with_the_class_s_priority_and_its_length(
    client_priority: int | None,
) -> None:
    extra = {} if client_priority is None else {"priority": client_priority}
    sent = completion("Batch me", **extra)
    answers = _exchange(BUFFERED, sent, "class")
    assert kinds(answers) == ["request_headers", "request_body"]
    body = _replaced_body(answers[1])
    assert body is not None
    assert json.loads(body) == {**json.loads(sent), "priority": 1}
    assert set_headers(answers[1])["content-length"] == str(len(body))


def test_a_full_duplex_body_streams_back_with_the_priority() -> None:
    sent = completion("Batch me too")
    answers = _exchange(FULL_DUPLEX, sent, "class")
    body, ends = streamed(answers, "request_body")
    assert json.loads(body) == {**json.loads(sent), "priority": 1}
    assert ends[-1] is True
    assert set_headers(answers[0])["content-length"] == str(len(body))


@pytest.mark.parametrize("mode", [BUFFERED, FULL_DUPLEX])
def test_without_engine_priority_the_body_goes_as_sent(mode: int) -> None:
    sent = completion("Leave me", priority=3)
    answers = _exchange(mode, sent, None)
    if mode == BUFFERED:
        assert _replaced_body(answers[1]) is None
        assert "content-length" not in set_headers(answers[1])
    else:
        assert streamed(answers, "request_body")[0] == sent
        assert "content-length" not in set_headers(answers[0])
