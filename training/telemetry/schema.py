"""The two telemetry tables, as Arrow schemas: per-request records and per-replica samples.

Times are UTC timestamps in microseconds; latencies are seconds; token counts are tokens.
Per-replica columns are named after the vLLM Prometheus metric they mirror, without the
``vllm:`` prefix, so a scrape and a simulator export land in the same columns.

## requests

One row per request, whatever its outcome.

| column | type | nullable | unit | meaning |
|---|---|---|---|---|
| request_id | int64 | no |  | id of the request, unique within one producer's run |
| arrival_time | timestamp[us, tz=UTC] | no |  | when the request reached the router |
| first_token_time | timestamp[us, tz=UTC] | yes |  | when its first output token was produced; null if never |
| finish_time | timestamp[us, tz=UTC] | yes |  | when its last output token was produced; null if never |
| input_tokens | int64 | no | tokens | prompt length |
| cached_tokens | int64 | no | tokens | prompt tokens served from the prefix cache (≤ input_tokens) |
| output_tokens | int64 | no | tokens | tokens generated (asked for, when unfinished) |
| replica | string | yes |  | replica id that served it; null if it never reached one |
| accelerator | string | yes |  | the replica's accelerator kind (catalogue name, e.g. H100-SXM) |
| model | string | yes |  | the replica's model name |
| tp | int32 | yes | GPUs | the replica's tensor-parallel degree |
| tenant | string | no |  | who sent it |
| request_class | string | no |  | its class of service (interactive, batch, …) |
| backlog_requests | int64 | no | requests | router-side counter at routing time: requests the router had in flight on the chosen replica; 0 when unknown |
| backlog_prefill_tokens | int64 | no | tokens | router-side counter at routing time: prompt tokens of those in-flight requests still without a first token; 0 when unknown |
| error | string | no |  | why it failed ("unfinished", "refused: …", "lost: …"); "" when served |
| ttft_s | float64 | yes | s | time to first token: first_token_time − arrival_time |
| tpot_s | float64 | yes | s | time per output token after the first: (finish − first token) / (output_tokens − 1); null when output_tokens ≤ 1 |
| e2e_s | float64 | yes | s | end-to-end latency: finish_time − arrival_time |

## replica_samples

One row per replica per sample instant, as its ``/metrics`` showed it.

| column | type | nullable | unit | meaning |
|---|---|---|---|---|
| time | timestamp[us, tz=UTC] | no |  | when the sample was taken |
| replica | string | no |  | replica id |
| accelerator | string | no |  | accelerator kind (catalogue name, e.g. H100-SXM) |
| model | string | no |  | model name |
| tp | int32 | no | GPUs | tensor-parallel degree |
| num_requests_running | int64 | no | requests | gauge vllm:num_requests_running |
| num_requests_waiting | int64 | no | requests | gauge vllm:num_requests_waiting |
| kv_cache_usage_perc | float64 | no | fraction 0..1 | gauge vllm:kv_cache_usage_perc (older vLLM: vllm:gpu_cache_usage_perc) |
| prompt_tokens_total | int64 | no | tokens | counter vllm:prompt_tokens_total, since the replica started |
| generation_tokens_total | int64 | no | tokens | counter vllm:generation_tokens_total, since the replica started |
| prefix_cache_hit_tokens_total | int64 | no | tokens | counter vllm:prefix_cache_hits, prompt tokens found in the prefix cache |
| ttft_seconds_sum | float64 | yes | s | vllm:time_to_first_token_seconds histogram, _sum |
| ttft_seconds_count | float64 | yes | requests | vllm:time_to_first_token_seconds histogram, _count |
| tpot_seconds_sum | float64 | yes | s | vllm:inter_token_latency_seconds (older: vllm:time_per_output_token_seconds) histogram, _sum |
| tpot_seconds_count | float64 | yes | tokens | the same histogram, _count |

Stored as Parquet under ``<store>/<table>/date=YYYY-MM-DD/`` (see :mod:`training.telemetry.store`).
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from placement.errors import InputError

REQUESTS = "requests"
REPLICA_SAMPLES = "replica_samples"

TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Column:
    """One documented column: Arrow type, whether it may be null, unit and meaning."""

    name: str
    type: Any  # a pyarrow.DataType
    nullable: bool
    unit: str
    meaning: str


REQUEST_COLUMNS: tuple[Column, ...] = (
    Column(
        "request_id", pa.int64(), False, "", "id of the request, unique within one producer's run"
    ),
    Column("arrival_time", TIMESTAMP, False, "", "when the request reached the router"),
    Column(
        "first_token_time",
        TIMESTAMP,
        True,
        "",
        "when its first output token was produced; null if never",
    ),
    Column(
        "finish_time", TIMESTAMP, True, "", "when its last output token was produced; null if never"
    ),
    Column("input_tokens", pa.int64(), False, "tokens", "prompt length"),
    Column(
        "cached_tokens",
        pa.int64(),
        False,
        "tokens",
        "prompt tokens served from the prefix cache (≤ input_tokens)",
    ),
    Column(
        "output_tokens",
        pa.int64(),
        False,
        "tokens",
        "tokens generated (asked for, when unfinished)",
    ),
    Column(
        "replica", pa.string(), True, "", "replica id that served it; null if it never reached one"
    ),
    Column(
        "accelerator",
        pa.string(),
        True,
        "",
        "the replica's accelerator kind (catalogue name, e.g. H100-SXM)",
    ),
    Column("model", pa.string(), True, "", "the replica's model name"),
    Column("tp", pa.int32(), True, "GPUs", "the replica's tensor-parallel degree"),
    Column("tenant", pa.string(), False, "", "who sent it"),
    Column("request_class", pa.string(), False, "", "its class of service (interactive, batch, …)"),
    Column(
        "backlog_requests",
        pa.int64(),
        False,
        "requests",
        "router-side counter at routing time: requests the router had in flight on the chosen"
        " replica; 0 when unknown",
    ),
    Column(
        "backlog_prefill_tokens",
        pa.int64(),
        False,
        "tokens",
        "router-side counter at routing time: prompt tokens of those in-flight requests still"
        " without a first token; 0 when unknown",
    ),
    Column(
        "error",
        pa.string(),
        False,
        "",
        'why it failed ("unfinished", "refused: …", "lost: …"); "" when served',
    ),
    Column(
        "ttft_s", pa.float64(), True, "s", "time to first token: first_token_time − arrival_time"
    ),
    Column(
        "tpot_s",
        pa.float64(),
        True,
        "s",
        "time per output token after the first: (finish − first token) / (output_tokens − 1);"
        " null when output_tokens ≤ 1",
    ),
    Column("e2e_s", pa.float64(), True, "s", "end-to-end latency: finish_time − arrival_time"),
)

SAMPLE_COLUMNS: tuple[Column, ...] = (
    Column("time", TIMESTAMP, False, "", "when the sample was taken"),
    Column("replica", pa.string(), False, "", "replica id"),
    Column(
        "accelerator", pa.string(), False, "", "accelerator kind (catalogue name, e.g. H100-SXM)"
    ),
    Column("model", pa.string(), False, "", "model name"),
    Column("tp", pa.int32(), False, "GPUs", "tensor-parallel degree"),
    Column(
        "num_requests_running", pa.int64(), False, "requests", "gauge vllm:num_requests_running"
    ),
    Column(
        "num_requests_waiting", pa.int64(), False, "requests", "gauge vllm:num_requests_waiting"
    ),
    Column(
        "kv_cache_usage_perc",
        pa.float64(),
        False,
        "fraction 0..1",
        "gauge vllm:kv_cache_usage_perc (older vLLM: vllm:gpu_cache_usage_perc)",
    ),
    Column(
        "prompt_tokens_total",
        pa.int64(),
        False,
        "tokens",
        "counter vllm:prompt_tokens_total, since the replica started",
    ),
    Column(
        "generation_tokens_total",
        pa.int64(),
        False,
        "tokens",
        "counter vllm:generation_tokens_total, since the replica started",
    ),
    Column(
        "prefix_cache_hit_tokens_total",
        pa.int64(),
        False,
        "tokens",
        "counter vllm:prefix_cache_hits, prompt tokens found in the prefix cache",
    ),
    Column(
        "ttft_seconds_sum",
        pa.float64(),
        True,
        "s",
        "vllm:time_to_first_token_seconds histogram, _sum",
    ),
    Column(
        "ttft_seconds_count",
        pa.float64(),
        True,
        "requests",
        "vllm:time_to_first_token_seconds histogram, _count",
    ),
    Column(
        "tpot_seconds_sum",
        pa.float64(),
        True,
        "s",
        "vllm:inter_token_latency_seconds (older: vllm:time_per_output_token_seconds)"
        " histogram, _sum",
    ),
    Column("tpot_seconds_count", pa.float64(), True, "tokens", "the same histogram, _count"),
)

TABLES: dict[str, tuple[Column, ...]] = {REQUESTS: REQUEST_COLUMNS, REPLICA_SAMPLES: SAMPLE_COLUMNS}
# the column each table is partitioned (by UTC day) and sorted on
TIME_COLUMN: dict[str, str] = {REQUESTS: "arrival_time", REPLICA_SAMPLES: "time"}
# the full sort order that makes a read deterministic
SORT_KEYS: dict[str, list[str]] = {
    REQUESTS: ["arrival_time", "request_id"],
    REPLICA_SAMPLES: ["time", "replica"],
}


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of a table's columns (nullability included)."""
    return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in columns])


REQUESTS_SCHEMA = arrow_schema(REQUEST_COLUMNS)
REPLICA_SAMPLES_SCHEMA = arrow_schema(SAMPLE_COLUMNS)
SCHEMAS: dict[str, pa.Schema] = {REQUESTS: REQUESTS_SCHEMA, REPLICA_SAMPLES: REPLICA_SAMPLES_SCHEMA}


def markdown_table(columns: tuple[Column, ...]) -> str:
    """A table's columns as the markdown table this module's docstring shows."""
    lines = [
        "| column | type | nullable | unit | meaning |",
        "|---|---|---|---|---|",
    ]
    for c in columns:
        cells = (c.name, type_name(c.type), "yes" if c.nullable else "no", c.unit, c.meaning)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def type_name(arrow_type: Any) -> str:
    """An Arrow type as the schema documents it (``float64`` rather than Arrow's ``double``)."""
    return "float64" if arrow_type == pa.float64() else str(arrow_type)


def _pandas_dtype(column: Column) -> Any:
    """The pandas dtype a column is read as: numpy dtypes, except a nullable integer column,
    which becomes pandas' masked integer dtype (so a null stays a null, not a float NaN)."""
    if pa.types.is_integer(column.type) and column.nullable:
        return {8: "Int8", 16: "Int16", 32: "Int32", 64: "Int64"}[column.type.bit_width]
    return None


def to_frame(table: pa.Table, columns: tuple[Column, ...]) -> pd.DataFrame:
    """An Arrow table of this schema as a pandas DataFrame with the schema's dtypes:
    timestamps ``datetime64[us, UTC]``, strings ``str``, int64/int32/float64 as numpy, nullable
    integers as pandas masked integers."""
    frame: pd.DataFrame = table.select([c.name for c in columns]).to_pandas()
    for c in columns:
        dtype = _pandas_dtype(c)
        if dtype is not None:
            frame[c.name] = frame[c.name].astype(dtype)
    return frame


def to_table(frame: pd.DataFrame, columns: tuple[Column, ...]) -> pa.Table:
    """A (validated) DataFrame as an Arrow table of this schema, in column order.

    Timestamps go through naive UTC values (pyarrow's own pandas conversion reads
    ``Series.values``, which pandas 3.1 deprecates for timezone-aware columns); anything finer
    than a microsecond is truncated to the schema's microseconds."""
    arrays = []
    for c in columns:
        series = frame[c.name]
        if pa.types.is_timestamp(c.type):
            naive = series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
            arrays.append(pa.array(naive, from_pandas=True).cast(c.type, safe=False))
        else:
            arrays.append(pa.array(series, type=c.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=arrow_schema(columns))


def frame_from_rows(rows: list[dict[str, Any]], columns: tuple[Column, ...]) -> pd.DataFrame:
    """Rows (dicts keyed by column, e.g. scraped samples) as a frame with the schema's dtypes;
    a value Arrow cannot hold in its column's type raises InputError."""
    try:
        table = pa.Table.from_pylist(rows, schema=arrow_schema(columns))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise InputError(f"a value does not fit the telemetry schema ({exc})") from None
    return to_frame(table, columns)


def empty_frame(columns: tuple[Column, ...]) -> pd.DataFrame:
    """A frame with no rows and the schema's dtypes."""
    return to_frame(arrow_schema(columns).empty_table(), columns)
