"""What the picker reads from OpenAI bodies, and the 400s for what it cannot read."""

from __future__ import annotations

import json

import pytest

from serving.epp.body import DEFAULT_MAX_OUTPUT_TOKENS, BadBody, parse_body


def _raw(**body: object) -> bytes:
    return json.dumps(body).encode()


READABLE = [
    # (case, body, prompt, tokens, max output tokens)
    ("completion text", _raw(model="m", prompt="Hello"), "Hello", None, DEFAULT_MAX_OUTPUT_TOKENS),
    ("empty prompt", _raw(model="m", prompt=""), "", None, DEFAULT_MAX_OUTPUT_TOKENS),
    (
        "batch of prompts",
        _raw(model="m", prompt=["a", "b"]),
        "a\nb",
        None,
        DEFAULT_MAX_OUTPUT_TOKENS,
    ),
    ("token ids", _raw(model="m", prompt=[1, 2, 3], max_tokens=7), None, (1, 2, 3), 7),
    ("batch of token ids", _raw(model="m", prompt=[[1, 2], [3]]), None, (1, 2, 3), 256),
    (
        "chat, string contents",
        _raw(
            model="m",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
        ),
        "system: Be brief.\nuser: Hi\n",
        None,
        DEFAULT_MAX_OUTPUT_TOKENS,
    ),
    (
        "chat, text parts (images do not count)",
        _raw(
            model="m",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is "},
                        {"type": "image_url", "image_url": {"url": "x"}},
                        {"type": "text", "text": "this?"},
                    ],
                }
            ],
        ),
        "user: What is this?\n",
        None,
        DEFAULT_MAX_OUTPUT_TOKENS,
    ),
    (
        "chat, null content (a tool call)",
        _raw(model="m", messages=[{"role": "assistant", "content": None}]),
        "assistant: \n",
        None,
        DEFAULT_MAX_OUTPUT_TOKENS,
    ),
    (
        "max_completion_tokens wins over max_tokens",
        _raw(model="m", prompt="x", max_completion_tokens=5, max_tokens=9),
        "x",
        None,
        5,
    ),
    (
        "null max_tokens is the default",
        _raw(model="m", prompt="x", max_tokens=None),
        "x",
        None,
        256,
    ),
]


@pytest.mark.parametrize(
    ("case", "raw", "prompt", "tokens", "max_output"), READABLE, ids=[c[0] for c in READABLE]
)
def test_readable_bodies(
    case: str, raw: bytes, prompt: str | None, tokens: tuple[int, ...] | None, max_output: int
) -> None:
    body = parse_body(raw)
    assert body.model == "m"
    assert body.prompt == prompt
    assert body.prompt_tokens == tokens
    assert body.max_output_tokens == max_output


def test_a_shared_first_message_is_a_shared_text_prefix() -> None:
    first = {"role": "system", "content": "You are a careful assistant. " * 20}
    a = parse_body(_raw(model="m", messages=[first, {"role": "user", "content": "A"}]))
    b = parse_body(_raw(model="m", messages=[first, {"role": "user", "content": "B"}]))
    assert a.prompt is not None and b.prompt is not None
    shared = len(f"system: {first['content']}\n")
    assert a.prompt[:shared] == b.prompt[:shared]
    assert a.prompt != b.prompt


UNREADABLE = [
    # (case, raw body, words the message must contain)
    ("not JSON", b"{model: m", "not JSON"),
    ("not UTF-8", b"\xff\xfe{", "not UTF-8"),
    ("not an object", b"[1, 2]", "not a JSON object"),
    ("no model", _raw(prompt="x"), "'model'"),
    ("model not a string", _raw(model=3, prompt="x"), "'model'"),
    ("neither prompt nor messages", _raw(model="m", input="x"), "neither 'prompt'"),
    ("empty prompt list", _raw(model="m", prompt=[]), "'prompt'"),
    ("mixed prompt list", _raw(model="m", prompt=["a", 1]), "mixes"),
    ("negative token id", _raw(model="m", prompt=[1, -2]), "'prompt'"),
    ("prompt an object", _raw(model="m", prompt={"a": 1}), "'prompt'"),
    ("messages not a list", _raw(model="m", messages="hi"), "'messages'"),
    ("message not an object", _raw(model="m", messages=["hi"]), "'messages[0]'"),
    ("message without role", _raw(model="m", messages=[{"content": "hi"}]), "'messages[0].role'"),
    (
        "content a number",
        _raw(model="m", messages=[{"role": "user", "content": 3}]),
        "'messages[0].content'",
    ),
    (
        "text part without text",
        _raw(model="m", messages=[{"role": "user", "content": [{"type": "text"}]}]),
        "'messages[0].content[0].text'",
    ),
    ("negative max_tokens", _raw(model="m", prompt="x", max_tokens=-1), "'max_tokens'"),
    ("boolean max_tokens", _raw(model="m", prompt="x", max_tokens=True), "'max_tokens'"),
    ("stream a string", _raw(model="m", prompt="x", stream="yes"), "'stream'"),
]


@pytest.mark.parametrize(("case", "raw", "words"), UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_unreadable_bodies_name_the_problem(case: str, raw: bytes, words: str) -> None:
    with pytest.raises(BadBody) as caught:
        parse_body(raw)
    assert words in str(caught.value)
