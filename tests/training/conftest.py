"""Telemetry frames built by hand, in the schemas' dtypes, for the training and store tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from training.telemetry.schema import (
    REPLICA_SAMPLES_SCHEMA,
    REQUEST_COLUMNS,
    REQUESTS_SCHEMA,
    SAMPLE_COLUMNS,
    to_frame,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


REQUEST_DEFAULTS = {
    "input_tokens": 1000,
    "cached_tokens": 0,
    "output_tokens": 11,
    "replica": "a",
    "accelerator": "H100-SXM",
    "model": "llama-3-8b",
    "tp": 1,
    "tenant": "t1",
    "request_class": "interactive",
    "backlog_requests": 2,
    "backlog_prefill_tokens": 1500,
    "error": "",
}

SAMPLE_DEFAULTS = {
    "replica": "a",
    "accelerator": "H100-SXM",
    "model": "llama-3-8b",
    "tp": 1,
    "num_requests_running": 0,
    "num_requests_waiting": 0,
    "kv_cache_usage_perc": 0.0,
    "prompt_tokens_total": 0,
    "generation_tokens_total": 0,
    "prefix_cache_hit_tokens_total": 0,
}


def request_row(request_id: int, arrival_s: float, ttft_s: float = 0.2, **fields):
    """A served request arriving ``arrival_s`` after T0, with consistent times and latencies."""
    row = {**REQUEST_DEFAULTS, **fields, "request_id": request_id, "arrival_time": at(arrival_s)}
    if row["error"]:
        row.update(first_token_time=None, finish_time=None, ttft_s=None, tpot_s=None, e2e_s=None)
        return row
    tpot = 0.02
    e2e = ttft_s + tpot * (row["output_tokens"] - 1)
    row.update(
        first_token_time=at(arrival_s + ttft_s),
        finish_time=at(arrival_s + e2e),
        ttft_s=ttft_s,
        tpot_s=tpot if row["output_tokens"] > 1 else None,
        e2e_s=e2e,
    )
    return row


def sample_row(time_s: float, **fields):
    return {**SAMPLE_DEFAULTS, **fields, "time": at(time_s)}


@pytest.fixture
def requests_frame():
    """rows → a requests frame with the schema's dtypes."""

    def make(rows):
        return to_frame(pa.Table.from_pylist(rows, schema=REQUESTS_SCHEMA), REQUEST_COLUMNS)

    return make


@pytest.fixture
def samples_frame():
    """rows → a replica_samples frame with the schema's dtypes."""

    def make(rows):
        return to_frame(pa.Table.from_pylist(rows, schema=REPLICA_SAMPLES_SCHEMA), SAMPLE_COLUMNS)

    return make


@pytest.fixture(name="at")
def at_fixture():
    """seconds after T0 (2026-03-01 12:00 UTC) → that time."""
    return at


@pytest.fixture
def request_rows():
    return request_row


@pytest.fixture
def sample_rows():
    return sample_row
