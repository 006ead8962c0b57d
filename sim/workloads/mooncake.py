"""The Mooncake (Kimi) conversation trace: real arrivals with real prefix sharing.

One JSON object per line::

    {"timestamp": <ms since the trace start>, "input_length": <tokens>,
     "output_length": <tokens>, "hash_ids": [<int>, ...]}

``hash_ids`` name 512-token prompt blocks, already prefix-chained by the trace's authors: two
requests whose first k ids agree share their first k×512 prompt tokens. A request has exactly
``ceil(input_length / 512)`` ids (checked here; it holds for every line of the published trace),
so the last id usually names a *partial* block. All ids are kept; a consumer that counts cached
tokens should cap ``k × 512`` at ``input_tokens``. The ids are mapped through
:func:`placement.domain.prefix.chain_block_ids` into the project's 63-bit chained hash
space, which keeps
"share the first k hashes ⇔ share the first k blocks".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Tenant
from placement.errors import InputError
from placement.paths import shared_file
from sim.workloads.assemble import assemble
from sim.workloads.base import Workload

MOONCAKE_TRACE = Path("traces/mooncake/conversation_trace_first2100s.jsonl")
MOONCAKE_BLOCK_TOKENS = 512
MOONCAKE_TENANT = "default"
MOONCAKE_CLASS = "interactive"


def load_mooncake(path: Path | None = None, *, limit: int | None = None) -> Workload:
    """The Mooncake conversation trace as a workload (one tenant, interactive class).

    ``path`` defaults to the shared copy; ``limit`` keeps the first requests in arrival order.
    Raises InputError naming the file, line and field of the first malformed line.
    """
    source = path if path is not None else shared_file(MOONCAKE_TRACE)
    arrival_s: list[float] = []
    input_tokens: list[int] = []
    output_tokens: list[int] = []
    block_hashes: list[tuple[int, ...]] = []
    try:
        with source.open(encoding="utf-8") as lines:
            for number, text in enumerate(lines, start=1):
                if not text.strip():
                    continue
                record = _parse_line(text, source, number)
                arrival_s.append(record[0] / 1000.0)
                input_tokens.append(record[1])
                output_tokens.append(record[2])
                block_hashes.append(chain_block_ids(record[3]))
    except OSError as exc:
        raise InputError(
            f"cannot read the Mooncake trace: {exc.strerror}", source=str(source)
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=str(source)) from exc
    n = len(arrival_s)
    return assemble(
        "mooncake",
        arrival_s=arrival_s,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tenant_index=[0] * n,
        tenant_names=[MOONCAKE_TENANT],
        class_index=[0] * n,
        class_names=[MOONCAKE_CLASS],
        tenants={MOONCAKE_TENANT: Tenant(name=MOONCAKE_TENANT, credit_share=1.0)},
        block_hashes=block_hashes,
        block_tokens=MOONCAKE_BLOCK_TOKENS,
        limit=limit,
    )


def _parse_line(text: str, source: Path, number: int) -> tuple[float, int, int, list[int]]:
    """(timestamp_ms, input_length, output_length, hash_ids) of one line, validated."""
    where: dict[str, Any] = {"source": str(source), "line": number}
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", **where) from None
    if not isinstance(record, dict):
        raise InputError("not a JSON object", **where, expected="{...}")
    timestamp = _field(record, "timestamp", where)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise InputError(f"got {timestamp!r}", **where, field="timestamp", expected="a number")
    if not math.isfinite(timestamp) or timestamp < 0:
        raise InputError(
            f"got {timestamp!r}", **where, field="timestamp", expected="milliseconds >= 0"
        )
    input_length = _count(record, "input_length", 1, where)
    output_length = _count(record, "output_length", 0, where)
    hash_ids = _field(record, "hash_ids", where)
    if not isinstance(hash_ids, list):
        raise InputError(f"got {hash_ids!r}", **where, field="hash_ids", expected="a list")
    for position, block in enumerate(hash_ids):
        if isinstance(block, bool) or not isinstance(block, int) or block < 0:
            raise InputError(
                f"element {position} is {block!r}",
                **where,
                field="hash_ids",
                expected="non-negative integers",
            )
    blocks = -(-input_length // MOONCAKE_BLOCK_TOKENS)
    if len(hash_ids) != blocks:
        raise InputError(
            f"{len(hash_ids)} ids for {input_length} input tokens",
            **where,
            field="hash_ids",
            expected=f"ceil(input_length / {MOONCAKE_BLOCK_TOKENS}) = {blocks} ids",
        )
    return float(timestamp), input_length, output_length, hash_ids


def _field(record: dict[str, Any], name: str, where: dict[str, Any]) -> Any:
    if name not in record:
        raise InputError("missing", **where, field=name)
    return record[name]


def _count(record: dict[str, Any], name: str, minimum: int, where: dict[str, Any]) -> int:
    value = _field(record, name, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"got {value!r}", **where, field=name, expected=f"an integer >= {minimum}")
    return value
