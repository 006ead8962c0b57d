"""Trace prompts: exactly the request's tokens, and a shared token prefix per shared block."""

from __future__ import annotations

from bench.trace_text import TraceText


def test_prompts_have_their_token_count_and_share_exactly_their_blocks() -> None:
    text = TraceText()
    a = text.prompt((11, 12, 13), 40, 16)
    b = text.prompt((11, 12, 99), 45, 16)
    ta, tb = text.tokenizer.encode(a), text.tokenizer.encode(b)
    assert (len(ta), len(tb)) == (40, 45)
    shared = next(i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y)
    assert 32 <= shared < 34  # two shared 16-token blocks (a third may agree by chance)
    assert text.prompt((11, 12, 13), 40, 16) == a  # deterministic
