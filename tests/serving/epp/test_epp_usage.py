"""Output tokens counted from the response bytes passing through the picker."""

from __future__ import annotations

import json

import pytest

from serving.epp.usage import OutputTokens

_USAGE_JSON = json.dumps({"choices": [{"text": "hi"}], "usage": {"completion_tokens": 12}}).encode()
_SSE = b"".join(
    f"data: {json.dumps({'choices': [{'text': t}]})}\n\n".encode() for t in ("a", "b", "c")
)
_SSE_USAGE = _SSE + b'data: {"choices": [], "usage": {"completion_tokens": 41}}\n\ndata: [DONE]\n\n'

CASES = [
    # (case, chunks, default, expected)
    ("JSON usage", [_USAGE_JSON], 99, 12),
    ("JSON usage split across chunks", [_USAGE_JSON[:-9], _USAGE_JSON[-9:]], 99, 12),
    ("stream usage in its last chunk", [_SSE_USAGE[:40], _SSE_USAGE[40:]], 99, 41),
    ("stream without usage: one token per event", [_SSE, b"data: [DONE]\n\n"], 99, 3),
    ("nothing to count: the default", [b"{}"], 99, 99),
    ("no body: the default", [], 7, 7),
]


@pytest.mark.parametrize(
    ("case", "chunks", "default", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_output_tokens(case: str, chunks: list[bytes], default: int, expected: int) -> None:
    counter = OutputTokens()
    for chunk in chunks:
        counter.feed(chunk)
    assert counter.tokens(default) == expected
