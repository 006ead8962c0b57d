"""Prefix block hashes.

A prompt is cut into fixed blocks; each block's hash chains its parent's, so two requests share
their first k hashes exactly when they share their first k blocks. Hashes are 63-bit integers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

_MASK = (1 << 63) - 1
_ROOT = 0x1F2E3D4C5B6A7988


def _mix(parent: int, block: int) -> int:
    # splitmix64-style finaliser over (parent, block): cheap, well spread, deterministic.
    z = (parent * 0x9E3779B97F4A7C15 + block + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & _MASK


def chain_block_ids(block_ids: Iterable[int], *, root: int = _ROOT) -> tuple[int, ...]:
    """Chain per-block content ids into prefix block hashes."""
    out: list[int] = []
    h = root
    for b in block_ids:
        h = _mix(h, b)
        out.append(h)
    return tuple(out)


def _content_id(chunk: Sequence[int] | str) -> int:
    data = chunk.encode() if isinstance(chunk, str) else b",".join(str(t).encode() for t in chunk)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def hash_tokens(tokens: Sequence[int], block_tokens: int) -> tuple[int, ...]:
    """Block hashes of a token sequence; a trailing partial block is not hashed."""
    full = len(tokens) // block_tokens
    return chain_block_ids(
        _content_id(tokens[i * block_tokens : (i + 1) * block_tokens]) for i in range(full)
    )


def hash_text(text: str, block_chars: int) -> tuple[int, ...]:
    """Block hashes of a prompt given as text (used when the caller has no tokens)."""
    full = len(text) // block_chars
    return chain_block_ids(
        _content_id(text[i * block_chars : (i + 1) * block_chars]) for i in range(full)
    )


def shared_prefix_blocks(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading block hashes two requests share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
