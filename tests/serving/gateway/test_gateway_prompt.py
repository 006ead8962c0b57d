"""An OpenAI body as the route path needs it: blocks, token estimate, determinism, usage asked."""

from __future__ import annotations

import json

import pytest

from serving.gateway.errors import GatewayError
from serving.gateway.prompt import cache_key, parse_request

MODEL = "llama-3-8b"


def _parse(path: str, body: object):  # type: ignore[no-untyped-def]
    return parse_request(path, json.dumps(body).encode(), block_chars=16)


def test_a_completion_is_hashed_in_text_blocks_and_estimated_in_tokens() -> None:
    request = _parse("/v1/completions", {"model": MODEL, "prompt": "a" * 40, "max_tokens": 8})
    assert len(request.block_hashes) == 2  # two whole 16-character blocks
    assert request.input_tokens == 10 and request.gen.max_tokens == 8
    assert not request.deterministic and not request.gen.stream


def test_two_chats_sharing_a_system_prompt_share_their_first_blocks() -> None:
    system = {"role": "system", "content": "You answer briefly and cite sources. " * 3}

    def chat(question: str):  # type: ignore[no-untyped-def]
        messages = [system, {"role": "user", "content": question}]
        return _parse("/v1/chat/completions", {"model": MODEL, "messages": messages})

    a, b = chat("What is a prefix cache?"), chat("Who wrote Hamlet?")
    shared = 0
    for x, y in zip(a.block_hashes, b.block_hashes, strict=False):
        if x != y:
            break
        shared += 1
    assert shared >= 5 and a.block_hashes != b.block_hashes


def test_a_stream_asks_for_usage_upstream_and_remembers_the_client_did_not() -> None:
    request = _parse("/v1/completions", {"model": MODEL, "prompt": "x", "stream": True})
    sent = json.loads(request.upstream_body)
    assert sent["stream_options"] == {"include_usage": True}
    assert not request.client_wants_usage
    asked = _parse(
        "/v1/completions",
        {"model": MODEL, "prompt": "x", "stream": True, "stream_options": {"include_usage": True}},
    )
    assert asked.client_wants_usage


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "%s", "prompt": "caf\\u00e9 \xc3\xa9", "stream": true}',
        b'  \n{"model":"%s","prompt":"x","stream":true,"stream_options":{"include_usage":false}}',
        b'{"model":"%s","prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}}',
    ],
)
def test_usage_is_asked_for_and_the_rest_of_the_body_kept(raw: bytes) -> None:
    raw = raw.replace(b"%s", MODEL.encode())
    request = parse_request("/v1/completions", raw, block_chars=64)
    sent, original = json.loads(request.upstream_body), json.loads(raw)
    assert sent["stream_options"]["include_usage"] is True
    assert {k: v for k, v in sent.items() if k != "stream_options"} == {
        k: v for k, v in original.items() if k != "stream_options"
    }
    assert (
        sent["stream_options"].items()
        >= {
            k: v for k, v in original.get("stream_options", {}).items() if k != "include_usage"
        }.items()
    )
    if b"stream_options" not in raw:  # spliced in: the client's bytes follow unchanged
        assert request.upstream_body.endswith(raw.strip()[1:])


@pytest.mark.parametrize(
    ("temperature", "deterministic"), [(0, True), (0.0, True), (0.7, False), (None, False)]
)
def test_only_temperature_zero_is_deterministic(
    temperature: float | None, deterministic: bool
) -> None:
    body = {"model": MODEL, "prompt": "x"}
    if temperature is not None:
        body["temperature"] = temperature
    assert _parse("/v1/completions", body).deterministic is deterministic


def test_the_cache_key_ignores_key_order_but_not_the_tenant() -> None:
    a = _parse("/v1/completions", {"model": MODEL, "prompt": "x", "temperature": 0})
    b = parse_request(
        "/v1/completions",
        b'{"temperature": 0, "prompt": "x", "model": "llama-3-8b"}',
        block_chars=16,
    )
    assert cache_key("acme", a) == cache_key("acme", b) != cache_key("globex", a)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "x"}, "model"),
        ({"model": MODEL, "prompt": 3}, "prompt"),
        ({"model": MODEL, "prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"model": MODEL, "prompt": "x", "stream": "yes"}, "stream"),
        ({"model": MODEL, "prompt": "x", "n": 2}, "n"),
        ({"model": MODEL, "prompt": [5] * 131_000, "max_tokens": 100}, "max_tokens"),
    ],
)
def test_bad_bodies_name_the_parameter(body: dict[str, object], param: str) -> None:
    with pytest.raises(GatewayError) as refused:
        _parse("/v1/completions", body)
    assert refused.value.status == 400 and refused.value.param == param


def test_long_words_that_may_fit_are_not_refused_for_an_estimate() -> None:
    # 6 characters a token (as in the Mooncake slice's text): chars / 4 is over the window,
    # chars / 8 is not; the replica, which tokenizes, has the last word
    words = " figure" * 126_000  # 882k characters, 126k tokens: within llama-3-8b's 131k
    request = _parse("/v1/completions", {"model": MODEL, "prompt": words, "max_tokens": 10})
    assert request.input_tokens <= 131_072 - 10
