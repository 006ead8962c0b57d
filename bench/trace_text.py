"""Prompt text for a trace's requests, built from their prefix blocks.

Traces such as Mooncake give each request's prompt as block ids, not text. To replay one over
HTTP every block becomes the same text wherever it appears: ``block_tokens`` words drawn (seeded
by the block's chained hash) from words that are each exactly one token of the vocabulary with
their leading space. Such words tokenize the same alone and side by side, so a prompt has
exactly its ``input_tokens`` tokens and two prompts share a token prefix exactly when they share
blocks, as in the trace (the last, partial block is cut to the tokens left).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sim.emulator.tokenizer import DEFAULT_ENCODING, Tokenizer

# candidate words; those that are not one token with a leading space are left out
_WORDS = (  # noqa: SIM905 - a paragraph reads better than 180 quoted words
    "time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education foot boy age policy music market sense nation plan college interest death "
    "experience effect use class control care field development role effort rate heart drug "
    "show leader light voice wife police mind price report decision son view relationship town "
    "road arm difference value building action model season society tax director position "
    "player record paper space ground form event official matter center couple site project "
    "activity star table need court oil situation cost industry figure street image phone data"
).split()


class TraceText:
    """Deterministic prompt text per block hash (cached: shared blocks are built once)."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        tokenizer = Tokenizer(encoding)
        self.tokenizer = tokenizer
        self.words = [w for w in _WORDS if len(tokenizer.encode(" " + w)) == 1]
        self._blocks: dict[int, list[str]] = {}

    def block(self, block_hash: int, block_tokens: int) -> list[str]:
        words = self._blocks.get(block_hash)
        if words is None or len(words) < block_tokens:
            rng = random.Random(block_hash)
            words = [" " + w for w in rng.choices(self.words, k=block_tokens)]
            self._blocks[block_hash] = words
        return words

    def prompt(self, block_hashes: Sequence[int], input_tokens: int, block_tokens: int) -> str:
        """``input_tokens`` words: the blocks' words in order, the last block cut short."""
        parts: list[str] = []
        left = input_tokens
        for h in block_hashes:
            if left <= 0:
                break
            words = self.block(h, block_tokens)
            parts.extend(words[: min(left, block_tokens)])
            left -= block_tokens
        if left > 0:  # more tokens than blocks: filler unique to this length
            parts.extend(self.block(input_tokens, left)[:left])
        return "".join(parts)
