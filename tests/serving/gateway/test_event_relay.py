"""The event relay: whole events as they come, partial ones held, usage read and stripped."""

from __future__ import annotations

import json

import pytest

from serving.gateway.stream import EventRelay, read_usage


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


CHUNK = _event({"choices": [{"index": 0, "text": " hi"}]})
USAGE = _event(
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
    }
)
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("strip", "expected"),
    [(False, CHUNK + CHUNK + USAGE + DONE), (True, CHUNK + CHUNK + DONE)],
)
def test_usage_is_read_and_stripped_only_when_the_gateway_asked_for_it(
    strip: bool, expected: bytes
) -> None:
    relay = EventRelay(strip_usage=strip)
    out = relay.feed(CHUNK) + relay.feed(CHUNK + USAGE) + relay.feed(DONE)
    assert out == expected
    assert relay.usage is not None
    assert (relay.usage.prompt_tokens, relay.usage.completion_tokens) == (7, 3)
    assert relay.usage.cached_tokens == 4 and relay.done


def test_a_partial_event_waits_for_its_end_and_nothing_more() -> None:
    relay = EventRelay(strip_usage=False)
    assert relay.feed(CHUNK[:10]) == b""
    assert relay.feed(CHUNK[10:] + CHUNK[:5]) == CHUNK
    assert relay.rest() == CHUNK[:5]


def test_a_usage_split_across_reads_is_still_found() -> None:
    relay = EventRelay(strip_usage=True)
    half = len(USAGE) // 2
    assert relay.feed(USAGE[:half]) == b""
    assert relay.feed(USAGE[half:] + DONE) == DONE
    assert relay.usage is not None and relay.usage.completion_tokens == 3


def test_read_usage_of_a_whole_body_and_of_one_without() -> None:
    body = json.dumps({"usage": {"prompt_tokens": 12, "completion_tokens": 5}}).encode()
    usage = read_usage(body)
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (12, 5)
    assert read_usage(b'{"choices": []}') is None
