"""Validation refuses bad telemetry, naming the column and how many rows, and drops nothing."""

from __future__ import annotations

import pandas as pd
import pytest

from placement.errors import InputError
from training.telemetry.validate import validate_requests, validate_samples


@pytest.fixture
def requests(requests_frame, request_rows):
    return requests_frame([request_rows(i, float(i)) for i in range(5)])


@pytest.fixture
def samples(samples_frame, sample_rows):
    return samples_frame([sample_rows(float(i)) for i in range(4)])


def test_good_frames_pass_untouched(requests, samples):
    before = requests.copy()
    validate_requests(requests)
    validate_samples(samples)
    pd.testing.assert_frame_equal(requests, before)


def test_missing_columns_are_named_with_the_rows_refused(requests):
    with pytest.raises(InputError) as err:
        validate_requests(requests.drop(columns=["ttft_s", "tenant"]))
    assert "'tenant'" in str(err.value) and "'ttft_s'" in str(err.value)
    assert "5 rows refused" in str(err.value)
    assert err.value.field in {"tenant", "ttft_s"}


def test_negative_latencies_name_the_column_and_the_row_count(requests):
    requests.loc[[1, 3], "ttft_s"] = -0.5
    with pytest.raises(InputError) as err:
        validate_requests(requests)
    assert err.value.field == "ttft_s"
    assert "column 'ttft_s': 2 of 5 rows are negative (first: row 1)" in str(err.value)


def test_negative_router_backlog_counters_are_refused(requests):
    requests.loc[2, "backlog_requests"] = -1
    requests.loc[[0, 4], "backlog_prefill_tokens"] = -100
    with pytest.raises(InputError) as err:
        validate_requests(requests)
    text = str(err.value)
    assert "column 'backlog_requests': 1 of 5 rows are negative (first: row 2)" in text
    assert "column 'backlog_prefill_tokens': 2 of 5 rows are negative (first: row 0)" in text


def test_unknown_accelerators_are_named_with_a_hint_for_aliases(requests):
    requests.loc[0, "accelerator"] = "TPU-v9"
    requests.loc[[2, 4], "accelerator"] = "h100"
    with pytest.raises(InputError) as err:
        validate_requests(requests)
    text = str(err.value)
    assert "3 of 5 rows" in text and "'TPU-v9'" in text
    assert "'h100' (write 'H100-SXM')" in text


def test_every_problem_is_reported_at_once(requests):
    requests.loc[0, "cached_tokens"] = 5000  # more than the 1000 input tokens
    requests.loc[1, "first_token_time"] = requests.loc[1, "arrival_time"] - pd.Timedelta(1, "s")
    requests.loc[2, "finish_time"] = pd.NaT  # a served request never finished?
    requests.loc[3, "output_tokens"] = -1
    with pytest.raises(InputError) as err:
        validate_requests(requests)
    text = str(err.value)
    assert text.count("1 of 5 rows") == 4
    for column in ("cached_tokens", "first_token_time", "finish_time", "output_tokens"):
        assert f"column '{column}'" in text


def test_wrong_dtypes_and_nulls_in_required_columns(requests):
    requests["input_tokens"] = requests["input_tokens"].astype(str)
    requests.loc[4, "tenant"] = None
    with pytest.raises(InputError) as err:
        validate_requests(requests)
    text = str(err.value)
    assert "column 'input_tokens': dtype" in text and "expected integers" in text
    assert "column 'tenant': 1 of 5 rows are null" in text


def test_naive_timestamps_are_refused(requests):
    requests["arrival_time"] = requests["arrival_time"].dt.tz_localize(None)
    with pytest.raises(InputError, match=r"arrival_time.*timezone-aware"):
        validate_requests(requests)


def test_failed_requests_may_have_null_times_and_replica(requests_frame, request_rows):
    validate_requests(
        requests_frame([request_rows(0, 0.0, error="refused: no replica can serve", replica=None)])
    )


def test_sample_rules(samples):
    samples.loc[0, "kv_cache_usage_perc"] = 1.5
    samples.loc[[1, 2], "prompt_tokens_total"] = -3
    samples.loc[3, "time"] = samples.loc[2, "time"]
    with pytest.raises(InputError) as err:
        validate_samples(samples)
    text = str(err.value)
    assert "column 'kv_cache_usage_perc': 1 of 4 rows are outside 0..1" in text
    assert "column 'prompt_tokens_total': 2 of 4 rows are negative" in text
    assert "column 'time': 1 of 4 rows repeat an earlier (replica, time)" in text


def test_missing_sample_column(samples):
    with pytest.raises(InputError, match=r"num_requests_waiting.*4 rows refused"):
        validate_samples(samples.drop(columns=["num_requests_waiting"]))


def test_not_a_frame():
    with pytest.raises(InputError, match="DataFrame"):
        validate_requests([{"request_id": 1}])  # type: ignore[arg-type]


def test_a_served_request_needs_its_replica_details(requests):
    requests.loc[2, "tp"] = pd.NA
    with pytest.raises(InputError, match="column 'tp': 1 of 5 rows are null for a served request"):
        validate_requests(requests)
