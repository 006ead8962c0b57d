"""Any trace file in the shipped formats, and any tenant mix over it.

Two formats, told apart by the file's extension:

- **JSONL** (``.jsonl``), one request a line, Mooncake's keys: ``timestamp`` (ms),
  ``input_length``, ``output_length``, optionally ``hash_ids`` (prefix block ids, 512 tokens a
  block), ``tenant``, ``request_class`` and ``model``;
- **CSV** (``.csv``), Azure's columns: ``TIMESTAMP`` (a date-time or seconds),
  ``ContextTokens``, ``GeneratedTokens``, optionally ``tenant``, ``request_class``, ``model``.

Both may name a LoRA ``adapter`` on the request's ``model`` (its base) with its
``adapter_rank`` (default :data:`DEFAULT_ADAPTER_RANK`); the workload declares every adapter
named.

:func:`with_tenancy` then gives the requests tenants from a tenants file
(:mod:`placement.domain.tenancy`): with ``traffic_share`` per tenant, each session (the first
two prefix blocks, else the request) goes to a tenant drawn by those shares from ``seed``; without,
the trace's own tenant names must all be declared there.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from placement.domain.adapters import LoraAdapter
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Request, Tenant
from placement.domain.tenancy import Tenancy
from placement.errors import InputError
from sim.workloads.assemble import assemble
from sim.workloads.base import Workload

DEFAULT_ADAPTER_RANK = 16
TRACE_TENANT = "trace"
TRACE_CLASS = "interactive"
JSONL_BLOCK_TOKENS = 512
_CSV_TIME = "TIMESTAMP"
_CSV_INPUT = "ContextTokens"
_CSV_OUTPUT = "GeneratedTokens"


class _Columns:
    def __init__(self) -> None:
        self.arrival_s: list[float] = []
        self.input_tokens: list[int] = []
        self.output_tokens: list[int] = []
        self.tenants: list[str] = []
        self.classes: list[str] = []
        self.models: list[str] = []
        self.adapters: dict[str, LoraAdapter] = {}
        self.adapter_of: list[str] = []
        self.hashes: list[tuple[int, ...]] = []


def load_trace_file(path: str | Path) -> Workload:
    """The requests of a JSONL or CSV trace; InputError naming the file, line and field."""
    p = Path(path)
    if p.suffix not in (".jsonl", ".csv"):
        raise InputError(
            f"unknown trace format {p.suffix or '(no extension)'!r}",
            source=str(p),
            expected=".jsonl (Mooncake keys) or .csv (Azure columns)",
        )
    cols = _Columns()
    try:
        with p.open(encoding="utf-8", newline="") as handle:
            if p.suffix == ".jsonl":
                _read_jsonl(handle, str(p), cols)
            else:
                _read_csv(handle, str(p), cols)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", source=str(p)) from None
    if not cols.arrival_s:
        raise InputError("no requests", source=str(p), expected="at least one request")
    return _workload(p.stem, cols, has_hashes=p.suffix == ".jsonl")


def _read_jsonl(handle: Any, source: str, cols: _Columns) -> None:
    for number, text in enumerate(handle, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", source=source, line=number) from None
        if not isinstance(record, dict):
            raise InputError("not a JSON object", source=source, line=number)
        cols.arrival_s.append(_number(record, "timestamp", source, number) / 1000.0)
        cols.input_tokens.append(_count(record, "input_length", 1, source, number))
        cols.output_tokens.append(_count(record, "output_length", 1, source, number))
        ids = record.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise InputError("not a list of integers", source=source, line=number, field="hash_ids")
        cols.hashes.append(chain_block_ids(ids))
        _labels(record, source, number, cols)


def _read_csv(handle: Any, source: str, cols: _Columns) -> None:
    reader = csv.DictReader(handle)
    missing = [
        c for c in (_CSV_TIME, _CSV_INPUT, _CSV_OUTPUT) if c not in (reader.fieldnames or [])
    ]
    if missing:
        raise InputError(
            f"missing column {', '.join(missing)}",
            source=source,
            line=1,
            field=missing[0],
            expected=f"columns {_CSV_TIME}, {_CSV_INPUT}, {_CSV_OUTPUT}",
        )
    for row in reader:
        line = reader.line_num
        cols.arrival_s.append(_timestamp(row[_CSV_TIME], source, line))
        cols.input_tokens.append(_count(row, _CSV_INPUT, 1, source, line))
        cols.output_tokens.append(_count(row, _CSV_OUTPUT, 1, source, line))
        _labels(row, source, line, cols)


def _labels(record: dict[str, Any], source: str, line: int, cols: _Columns) -> None:
    for key, out, default in (
        ("tenant", cols.tenants, TRACE_TENANT),
        ("request_class", cols.classes, TRACE_CLASS),
        ("model", cols.models, ""),
    ):
        value = record.get(key) or default
        if not isinstance(value, str):
            raise InputError("not a string", source=source, line=line, field=key)
        out.append(value)
    _adapter(record, source, line, cols)


def _adapter(record: dict[str, Any], source: str, line: int, cols: _Columns) -> None:
    name = record.get("adapter") or ""
    if not isinstance(name, str):
        raise InputError("not a string", source=source, line=line, field="adapter")
    cols.adapter_of.append(name)
    if not name:
        return
    base = cols.models[-1]
    if not base:
        raise InputError(
            f"adapter {name!r} without a model",
            source=source,
            line=line,
            field="model",
            expected="the adapter's base model",
        )
    rank = DEFAULT_ADAPTER_RANK
    if record.get("adapter_rank") not in (None, ""):
        rank = _count(record, "adapter_rank", 1, source, line)
    adapter = LoraAdapter(name=name, base=base, rank=rank)
    known = cols.adapters.setdefault(name, adapter)
    if known != adapter:
        raise InputError(
            f"adapter {name!r} named with base {base!r} rank {rank}, earlier with base "
            f"{known.base!r} rank {known.rank}",
            source=source,
            line=line,
            field="adapter",
            expected="one base model and rank per adapter",
        )


def _number(record: dict[str, Any], key: str, source: str, line: int) -> float:
    value = record.get(key)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(
            f"got {value!r}", source=source, line=line, field=key, expected="a number"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise InputError(
            f"got {value!r}", source=source, line=line, field=key, expected="a number ≥ 0"
        )
    return number


def _count(record: dict[str, Any], key: str, minimum: int, source: str, line: int) -> int:
    number = _number(record, key, source, line)
    if number != int(number) or number < minimum:
        raise InputError(
            f"got {record.get(key)!r}",
            source=source,
            line=line,
            field=key,
            expected=f"a whole number ≥ {minimum}",
        )
    return int(number)


def _timestamp(text: str, source: str, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise InputError(
            f"got {text!r}",
            source=source,
            line=line,
            field=_CSV_TIME,
            expected="seconds or an ISO date-time",
        ) from None


def _workload(name: str, cols: _Columns, *, has_hashes: bool) -> Workload:
    tenant_names = sorted(set(cols.tenants))
    class_names = sorted(set(cols.classes))
    workload = assemble(
        name,
        arrival_s=cols.arrival_s,
        input_tokens=cols.input_tokens,
        output_tokens=cols.output_tokens,
        tenant_index=[tenant_names.index(t) for t in cols.tenants],
        tenant_names=tenant_names,
        class_index=[class_names.index(c) for c in cols.classes],
        class_names=class_names,
        tenants={t: Tenant(name=t, credit_share=1.0 / len(tenant_names)) for t in tenant_names},
        block_hashes=cols.hashes if has_hashes else None,
        block_tokens=JSONL_BLOCK_TOKENS,
    )
    # assemble orders by arrival (stable): the models follow the same order
    order = sorted(range(len(cols.arrival_s)), key=lambda i: cols.arrival_s[i])
    for request, i in zip(workload.requests, order, strict=True):
        request.model = cols.models[i]
        request.adapter = cols.adapter_of[i]
    workload.adapters = dict(cols.adapters)
    return workload


def with_tenancy(workload: Workload, tenancy: Tenancy, *, seed: int = 0) -> Workload:
    """``workload`` with the tenants (and request classes) of a tenants file.

    With traffic shares, every session goes to one tenant drawn by the shares (the same seed,
    the same draw); without, the trace's tenant names must all be declared in the file."""
    unknown = {r.request_class for r in workload.requests} - set(tenancy.classes)
    if unknown:
        raise InputError(
            f"the trace uses request classes the tenants file does not declare: "
            f"{', '.join(sorted(unknown))}",
            field="classes",
        )
    if tenancy.traffic_shares:
        _assign(workload.requests, tenancy.traffic_shares, seed)
    else:
        undeclared = {r.tenant for r in workload.requests} - set(tenancy.tenants)
        if undeclared:
            raise InputError(
                f"the trace's tenants {', '.join(sorted(undeclared))} are not in the tenants file",
                field="tenants",
                expected="every tenant of the trace declared, or traffic_share per tenant",
            )
    return Workload(
        name=workload.name,
        requests=workload.requests,
        tenants=dict(tenancy.tenants),
        classes=dict(tenancy.classes),
        block_tokens=workload.block_tokens,
        adapters=workload.adapters,
    )


def _assign(requests: Sequence[Request], shares: Mapping[str, float], seed: int) -> None:
    names = sorted(shares)
    total = sum(shares[n] for n in names)
    bounds, acc = [], 0.0
    for n in names:
        acc += shares[n] / total
        bounds.append(acc)
    for r in requests:
        # a session: its first two prefix blocks (the first alone is often a system prompt
        # every session shares); a request without prefix blocks is its own session
        hashes = r.block_hashes
        session = hashes[min(1, len(hashes) - 1)] if hashes else r.id
        digest = hashlib.blake2b(f"{seed}:{session}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2.0**64
        r.tenant = next((n for n, b in zip(names, bounds, strict=True) if u < b), names[-1])
