from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_rows import request_rows

from models.features import (
    FEATURES,
    INPUT_COLUMNS,
    build_features,
    feature_matrix,
    features_frame,
)
from models.roofline_prior import kind_roofline
from placement.errors import InputError, UnknownAccelerator, UnknownModel


def test_replica_features_are_datasheet_numbers_in_documented_units() -> None:
    f = features_frame(request_rows())
    row = f.iloc[0]
    assert row["gpu_dense_tflops"] == 989  # H100 SXM dense BF16
    assert row["gpu_hbm_tbps"] == 3.35
    assert row["gpu_hbm_gb"] == 80
    assert row["tp"] == 1
    # Llama-3-8B: ~8.0e9 parameters; KV = 2 (K,V) · 32 layers · 8 heads · 128 dims · 2 bytes
    assert row["model_params_b"] == pytest.approx(8.03, abs=0.01)
    assert row["model_kv_kib_per_token"] == 2 * 32 * 8 * 128 * 2 / 1024
    # 80 GB · 0.9 − 16 GB weights − 2 GB reserve, at 128 KiB per token: ~411k tokens
    assert row["kv_capacity_ktokens"] == pytest.approx(411.5, abs=1.0)


def test_load_and_request_columns_pass_through_and_derived_rate_is_uncached() -> None:
    f = features_frame(request_rows(prompt_tokens_per_s=4000.0, prefix_cache_hit_rate=0.25))
    row = f.iloc[0]
    assert row["num_requests_running"] == 8
    assert row["uncached_tokens"] == 1000
    assert row["uncached_prompt_tokens_per_s"] == pytest.approx(3000.0)
    assert row["ttft_prior_log_s"] < 0  # ln of well under a second


def test_columns_follow_the_features_tuple_and_aliases_give_the_same_row() -> None:
    rows = pd.concat(
        [request_rows(), request_rows(accelerator="h100", model="meta-llama/llama-3.1-8b")],
        ignore_index=True,
    )
    x = build_features(rows)
    assert x.shape == (2, len(FEATURES))
    np.testing.assert_array_equal(x[0], x[1])


def test_mixed_kinds_map_each_row_to_its_own_replica() -> None:
    rows = pd.concat(
        [request_rows(), request_rows(accelerator="L40S"), request_rows(tp=2)], ignore_index=True
    )
    fm = feature_matrix(rows)
    assert fm.column("gpu_dense_tflops").tolist() == [989, 362, 989]
    assert fm.column("tp").tolist() == [1, 1, 2]
    # slower hardware, slower prior; two GPUs faster than one
    ttft = fm.prior.ttft_s
    assert ttft[1] > ttft[0] > ttft[2]


def test_extra_columns_are_ignored_and_empty_frames_give_empty_features() -> None:
    rows = request_rows().assign(tenant="t", ttft_s=0.1)
    assert build_features(rows).shape == (1, len(FEATURES))
    assert build_features(request_rows().iloc[:0]).shape == (0, len(FEATURES))


def test_router_counters_are_features_and_default_to_zero_when_absent() -> None:
    given = features_frame(
        request_rows(
            backlog_requests=5,
            backlog_prefill_tokens=7000,
            backlog_oldest_wait_s=1.5,
            routed_requests_per_s=2.5,
        )
    ).iloc[0]
    assert given["backlog_requests"] == 5 and given["backlog_prefill_tokens"] == 7000
    assert given["backlog_oldest_wait_s"] == 1.5 and given["routed_requests_per_s"] == 2.5
    absent = request_rows().drop(columns=["backlog_requests", "backlog_prefill_tokens"])
    row = features_frame(absent).iloc[0]
    assert row["backlog_requests"] == 0 and row["backlog_prefill_tokens"] == 0
    assert row["backlog_oldest_wait_s"] == 0 and row["routed_requests_per_s"] == 0
    zero = features_frame(
        request_rows(
            backlog_requests=0,
            backlog_prefill_tokens=0,
            backlog_oldest_wait_s=0.0,
            routed_requests_per_s=0.0,
        )
    ).iloc[0]
    pd.testing.assert_series_equal(row, zero)


def test_missing_columns_are_all_named() -> None:
    rows = request_rows().drop(columns=["kv_cache_usage_perc", "output_tokens"])
    with pytest.raises(InputError, match="kv_cache_usage_perc, output_tokens"):
        build_features(rows)
    assert "kv_cache_usage_perc" in INPUT_COLUMNS


def test_unknown_accelerator_names_it_and_counts_rows() -> None:
    rows = pd.concat([request_rows(2), request_rows(3, accelerator="Z900")], ignore_index=True)
    with pytest.raises(UnknownAccelerator, match=r"'Z900' in 3 of 5 rows") as info:
        build_features(rows)
    assert info.value.field == "accelerator"


def test_unknown_model_names_it_and_counts_rows() -> None:
    with pytest.raises(UnknownModel, match=r"'gpt-9' in 2 of 2 rows"):
        build_features(request_rows(2, model="gpt-9"))


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("num_requests_running", -1),
        ("kv_cache_usage_perc", 1.5),
        ("backlog_prefill_tokens", -5),
        ("backlog_oldest_wait_s", -0.1),
        ("routed_requests_per_s", np.inf),
        ("prefix_cache_hit_rate", np.nan),
        ("input_tokens", "many"),
        ("tp", 0),
        ("tp", 1.5),
    ],
)
def test_out_of_range_values_name_the_column(column: str, value: object) -> None:
    with pytest.raises(InputError) as info:
        build_features(request_rows(**{column: value}))
    assert info.value.field == column


def test_more_uncached_than_input_tokens_is_refused() -> None:
    with pytest.raises(InputError, match="more uncached than input") as info:
        build_features(request_rows(input_tokens=100, uncached_tokens=200))
    assert info.value.field == "uncached_tokens"


def test_tp_that_does_not_divide_the_heads_is_refused() -> None:
    with pytest.raises(InputError, match="cannot be split") as info:
        build_features(request_rows(tp=3))
    assert info.value.field == "tp"


def test_the_prefill_left_ahead_falls_with_the_oldest_wait_at_the_prefill_rate() -> None:
    rows = pd.concat(
        [
            request_rows(backlog_prefill_tokens=20_000, backlog_oldest_wait_s=w)
            for w in (0, 0.1, 60)
        ],
        ignore_index=True,
    )
    fm = feature_matrix(rows)
    roof = kind_roofline(fm.inputs.kinds[0])
    rate = roof.max_batched_tokens / roof.full_chunk_s()
    left = fm.column("backlog_prefill_left_tokens")
    assert left[0] == 20_000  # just routed: nothing of it done yet
    assert left[1] == pytest.approx(20_000 - 0.1 * rate)
    assert left[2] == 0.0  # long enough for all of it: never below 0
