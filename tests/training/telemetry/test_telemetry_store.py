"""The Parquet store: day partitions, append-only writes, reads that equal what was written."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from placement.errors import InputError
from training.telemetry.store import (
    read_requests,
    read_samples,
    summarise_store,
    write_telemetry,
)


@pytest.fixture
def requests(requests_frame, request_rows):
    """Five requests across midnight (T0 is 12:00, so +12 h is the next day), one refused."""
    return requests_frame(
        [
            request_rows(1, 0.0),
            request_rows(2, 10.0, replica="b", accelerator="A100-80G", tp=2, cached_tokens=512),
            request_rows(3, 20.0, error="refused: no replica can serve", replica=None, tp=None),
            request_rows(4, 12 * 3600 + 5.0, output_tokens=1),
            request_rows(5, 12 * 3600 + 6.0, tenant="t2", request_class="batch"),
        ]
    )


@pytest.fixture
def samples(samples_frame, sample_rows):
    return samples_frame(
        [
            sample_rows(0.0),
            sample_rows(0.0, replica="b", accelerator="A100-80G", tp=2, kv_cache_usage_perc=0.5),
            sample_rows(1.0, prompt_tokens_total=900, ttft_seconds_sum=0.4, ttft_seconds_count=2),
            sample_rows(12 * 3600 + 1.0, generation_tokens_total=77),
        ]
    )


def test_written_then_read_equals_the_original(tmp_path, requests, samples):
    write_telemetry(tmp_path, requests, samples)
    pd.testing.assert_frame_equal(read_requests(tmp_path), requests)
    pd.testing.assert_frame_equal(read_samples(tmp_path), samples)


def test_files_are_partitioned_by_utc_day(tmp_path, requests, samples):
    files = write_telemetry(tmp_path, requests, samples)
    folders = sorted(str(f.parent.relative_to(tmp_path)) for f in files)
    assert folders == [
        "replica_samples/date=2026-03-01",
        "replica_samples/date=2026-03-02",
        "requests/date=2026-03-01",
        "requests/date=2026-03-02",
    ]
    assert all(f.suffix == ".parquet" for f in files)
    assert not list(tmp_path.glob("_staging*"))  # nothing left half-written
    # plain pandas reads the store too, with the partition as a column
    direct = pd.read_parquet(tmp_path / "requests")
    assert len(direct) == 5 and set(direct["date"].astype(str)) == {"2026-03-01", "2026-03-02"}


def test_writes_append_and_never_touch_existing_files(tmp_path, requests, samples):
    first = write_telemetry(tmp_path, requests, None)
    before = {f: f.read_bytes() for f in first}
    later = requests.copy()
    later["arrival_time"] += pd.Timedelta(days=1)
    later["first_token_time"] += pd.Timedelta(days=1)
    later["finish_time"] += pd.Timedelta(days=1)
    second = write_telemetry(tmp_path, later, samples)
    assert not set(first) & set(second)
    assert all(f.read_bytes() == data for f, data in before.items())
    assert len(read_requests(tmp_path)) == 10


def test_reads_keep_a_half_open_time_range_and_skip_other_days(tmp_path, requests, samples, at):
    write_telemetry(tmp_path, requests, samples)
    # a damaged file on the first day: only a read that opens that day notices it
    (tmp_path / "requests/date=2026-03-01/part-damaged.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="unreadable telemetry"):
        read_requests(tmp_path)
    next_day = read_requests(tmp_path, start=at(12 * 3600), end=at(12 * 3600 + 6.0))
    assert list(next_day["request_id"]) == [4]  # 5 arrives exactly at `end`: excluded
    window = read_samples(tmp_path, start=at(0.5), end=at(2.0))
    assert list(window["prompt_tokens_total"]) == [900]


def test_bad_frames_are_refused_before_anything_is_written(tmp_path, requests, samples):
    samples.loc[1, "accelerator"] = "Z9000"
    with pytest.raises(InputError, match="Z9000"):
        write_telemetry(tmp_path / "store", requests, samples)
    assert not (tmp_path / "store").exists()


def test_a_store_that_does_not_exist_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_requests(tmp_path / "nowhere")
    with pytest.raises(InputError, match="does not exist"):
        summarise_store(tmp_path / "nowhere")


def test_an_empty_store_reads_as_empty_frames_with_the_dtypes(tmp_path, requests, samples):
    empty = read_requests(tmp_path)
    assert empty.empty and dict(empty.dtypes) == dict(requests.dtypes)
    assert dict(read_samples(tmp_path).dtypes) == dict(samples.dtypes)
    assert summarise_store(tmp_path) == []


def test_time_bounds_need_a_zone(tmp_path):
    with pytest.raises(InputError, match="start"):
        read_requests(tmp_path, start=datetime(2026, 3, 1))


def test_samples_stored_twice_are_refused_on_read(tmp_path, samples):
    write_telemetry(tmp_path, None, samples)
    write_telemetry(tmp_path, None, samples)
    with pytest.raises(InputError, match=r"4 of 8 rows repeat an earlier \(replica, time\)"):
        read_samples(tmp_path)


def test_summary_counts_rows_per_table_and_day(tmp_path, requests, samples, at):
    write_telemetry(tmp_path, requests, samples)
    summary = {(d.table, d.date): d for d in summarise_store(tmp_path)}
    assert summary[("requests", "2026-03-01")].rows == 3
    assert summary[("requests", "2026-03-02")].rows == 2
    assert summary[("replica_samples", "2026-03-01")].last == pd.Timestamp(at(1.0))


def test_a_file_without_the_tables_columns_is_refused_not_counted(tmp_path, requests, samples):
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_telemetry(tmp_path, requests, samples)
    stray = tmp_path / "replica_samples/date=2026-03-01/part-stray.parquet"
    columns = {"time": pa.array([0], pa.timestamp("us", tz="UTC")), "replica": ["x"]}
    pq.write_table(pa.table(columns), stray)
    for read in (read_samples, summarise_store):
        with pytest.raises(InputError, match="not a replica_samples table") as err:
            read(tmp_path)
        assert err.value.source == str(stray)
        assert "missing columns accelerator, model, tp" in str(err.value)
    # a read of the other day does not open the stray file
    assert len(read_samples(tmp_path, start=at_day_two())) == 1


def test_a_truncated_file_is_named_by_the_summary(tmp_path, requests, samples):
    write_telemetry(tmp_path, requests, samples)
    victim = next((tmp_path / "requests").glob("date=2026-03-02/*.parquet"))
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(InputError, match="unreadable telemetry") as err:
        summarise_store(tmp_path)
    assert err.value.source == str(victim)


def at_day_two() -> datetime:
    return datetime.fromisoformat("2026-03-02T00:00:00+00:00")
