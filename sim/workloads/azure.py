"""The Azure LLM inference traces (2023): one hour of chat ("conv") and code-completion traffic.

CSV with a header ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is a datetime with
up to 7 fractional digits (100 ns ticks), e.g. ``2023-11-16 18:15:46.6805900``. Arrivals are the
seconds since the first row, kept to the nanosecond (integer arithmetic, no float drift). The
traces carry no prompt content, so requests have no prefix blocks (``block_hashes == ()``).
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from placement.domain.requests import Tenant
from placement.errors import InputError
from placement.paths import shared_file
from sim.workloads.assemble import assemble
from sim.workloads.base import Workload

AzureKind = Literal["conv", "code"]
AZURE_KINDS: tuple[AzureKind, ...] = ("conv", "code")
AZURE_DIR = Path("traces/azure_llm_2023")
AZURE_CLASS = "interactive"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?")


def azure_trace_path(kind: AzureKind) -> Path:
    """The shared copy of one Azure trace."""
    return shared_file(AZURE_DIR / f"AzureLLMInferenceTrace_{kind}.csv")


def load_azure(kind: AzureKind, path: Path | None = None, *, limit: int | None = None) -> Workload:
    """One Azure trace as a workload: tenant ``azure-<kind>``, interactive class, no prefixes.

    ``path`` defaults to the shared copy; ``limit`` keeps the first requests in arrival order.
    Raises InputError naming the file, line and column of the first malformed row.
    """
    if kind not in AZURE_KINDS:
        raise InputError(f"unknown Azure trace kind {kind!r}", expected=" or ".join(AZURE_KINDS))
    source = path if path is not None else azure_trace_path(kind)
    arrival_ns, input_tokens, output_tokens = _read_rows(source)
    tenant = f"azure-{kind}"
    n = len(arrival_ns)
    first = min(arrival_ns, default=0)
    return assemble(
        f"azure-{kind}",
        arrival_s=[(t - first) / 1e9 for t in arrival_ns],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tenant_index=[0] * n,
        tenant_names=[tenant],
        class_index=[0] * n,
        class_names=[AZURE_CLASS],
        tenants={tenant: Tenant(name=tenant, credit_share=1.0)},
        limit=limit,
    )


def _read_rows(source: Path) -> tuple[list[int], list[int], list[int]]:
    """(arrival in ns since the epoch, context tokens, generated tokens) of every data row."""
    arrival_ns: list[int] = []
    input_tokens: list[int] = []
    output_tokens: list[int] = []
    try:
        with source.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            positions = _header_positions(header, source)
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                line = reader.line_num
                if len(row) <= max(positions):
                    raise InputError(
                        f"{len(row)} columns",
                        source=str(source),
                        line=line,
                        expected=f"at least {max(positions) + 1} columns",
                    )
                stamp, context, generated = (row[p] for p in positions)
                arrival_ns.append(_parse_timestamp(stamp, source, line))
                input_tokens.append(_parse_count(context, COLUMNS[1], 1, source, line))
                output_tokens.append(_parse_count(generated, COLUMNS[2], 0, source, line))
    except OSError as exc:
        raise InputError(
            f"cannot read the Azure trace: {exc.strerror}", source=str(source)
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=str(source)) from exc
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", source=str(source)) from exc
    return arrival_ns, input_tokens, output_tokens


def _header_positions(header: list[str] | None, source: Path) -> tuple[int, int, int]:
    if header is None:
        raise InputError("empty file", source=str(source), expected="a header " + ",".join(COLUMNS))
    names = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"header {header!r} lacks {missing}",
            source=str(source),
            line=1,
            field=missing[0],
            expected="columns " + ",".join(COLUMNS),
        )
    return names.index(COLUMNS[0]), names.index(COLUMNS[1]), names.index(COLUMNS[2])


def _parse_timestamp(text: str, source: Path, line: int) -> int:
    """Nanoseconds since the epoch of a naive datetime (read as UTC: only differences matter)."""
    match = _TIMESTAMP.fullmatch(text.strip())
    when: datetime | None = None
    if match is not None:
        try:
            when = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
        except ValueError:
            when = None
    if match is None or when is None:
        raise InputError(
            f"got {text!r}",
            source=str(source),
            line=line,
            field=COLUMNS[0],
            expected="a datetime like 2023-11-16 18:15:46.6805900",
        )
    fraction = (match.group(2) or "").ljust(9, "0")
    return int(when.timestamp()) * 1_000_000_000 + int(fraction)


def _parse_count(text: str, column: str, minimum: int, source: Path, line: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise InputError(
            f"got {text!r}",
            source=str(source),
            line=line,
            field=column,
            expected=f"an integer >= {minimum}",
        )
    return value
