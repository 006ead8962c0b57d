"""The telemetry schemas: exact column names, documented in the module docstring."""

from __future__ import annotations

import pyarrow as pa

from training.telemetry import schema


def test_request_columns_are_the_agreed_names_and_types():
    s = schema.REQUESTS_SCHEMA
    assert s.names == [
        "request_id",
        "arrival_time",
        "first_token_time",
        "finish_time",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "replica",
        "accelerator",
        "model",
        "tp",
        "tenant",
        "request_class",
        "backlog_requests",
        "backlog_prefill_tokens",
        "error",
        "ttft_s",
        "tpot_s",
        "e2e_s",
    ]
    assert s.field("arrival_time").type == pa.timestamp("us", tz="UTC")
    assert not s.field("arrival_time").nullable
    assert s.field("first_token_time").nullable and s.field("tpot_s").nullable
    assert s.field("tp").type == pa.int32()
    for name in ("backlog_requests", "backlog_prefill_tokens"):
        assert s.field(name).type == pa.int64() and not s.field(name).nullable


def test_sample_columns_mirror_vllm_metric_names():
    s = schema.REPLICA_SAMPLES_SCHEMA
    for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert name in s.names
        assert not s.field(name).nullable
    for name in ("ttft_seconds_sum", "ttft_seconds_count", "tpot_seconds_sum"):
        assert s.field(name).nullable and s.field(name).type == pa.float64()
    assert s.field("prompt_tokens_total").type == pa.int64()


def test_the_docstring_documents_every_column_as_rendered():
    doc = schema.__doc__
    assert schema.markdown_table(schema.REQUEST_COLUMNS) in doc
    assert schema.markdown_table(schema.SAMPLE_COLUMNS) in doc


def test_empty_frames_have_numpy_dtypes_except_nullable_integers():
    requests = schema.empty_frame(schema.REQUEST_COLUMNS)
    assert str(requests["arrival_time"].dtype) == "datetime64[us, UTC]"
    assert str(requests["tp"].dtype) == "Int32"  # null when never placed
    assert str(requests["input_tokens"].dtype) == "int64"
    samples = schema.empty_frame(schema.SAMPLE_COLUMNS)
    assert str(samples["tp"].dtype) == "int32"
