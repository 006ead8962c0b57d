"""build_training_frame: served requests joined with their replica's state at arrival."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from training.dataset import ROUTED_RATE_WINDOW_S, TRAINING_COLUMNS, build_training_frame


@pytest.fixture
def two_replicas(samples_frame, sample_rows):
    """Replica a sampled at 0, 1, 2 s; replica b at 0.5 s only."""
    return samples_frame(
        [
            sample_rows(0.0, prompt_tokens_total=100, generation_tokens_total=10),
            sample_rows(
                1.0,
                num_requests_running=3,
                num_requests_waiting=1,
                kv_cache_usage_perc=0.25,
                prompt_tokens_total=1100,
                generation_tokens_total=210,
                prefix_cache_hit_tokens_total=400,
            ),
            sample_rows(
                2.0,
                num_requests_running=5,
                prompt_tokens_total=1100,
                generation_tokens_total=410,
                prefix_cache_hit_tokens_total=400,
            ),
            sample_rows(0.5, replica="b", accelerator="A100-80G", num_requests_running=7),
        ]
    )


def test_each_request_gets_its_replicas_latest_earlier_sample(
    two_replicas, requests_frame, request_rows
):
    requests = requests_frame(
        [
            request_rows(
                1,
                1.5,
                input_tokens=800,
                cached_tokens=300,
                backlog_requests=4,
                backlog_prefill_tokens=2600,
            ),
            request_rows(2, 0.7, replica="b", accelerator="A100-80G"),
        ]
    )
    frame = build_training_frame(requests, two_replicas)
    assert list(frame.columns) == TRAINING_COLUMNS
    assert list(frame["request_id"]) == [2, 1]  # by arrival time
    on_a = frame.set_index("request_id").loc[1]
    # the sample at 1.0 s: 1000 prompt and 200 generated tokens, 400 hits, over 1 s
    assert on_a["num_requests_running"] == 3
    assert on_a["num_requests_waiting"] == 1
    assert on_a["kv_cache_usage_perc"] == 0.25
    assert on_a["prompt_tokens_per_s"] == pytest.approx(1000.0)
    assert on_a["generation_tokens_per_s"] == pytest.approx(200.0)
    assert on_a["prefix_cache_hit_rate"] == pytest.approx(0.4)
    assert on_a["sample_age_s"] == pytest.approx(0.5)
    assert on_a["uncached_tokens"] == 500
    # the router's own counters travel with the request, untouched by the join
    assert on_a["backlog_requests"] == 4
    assert on_a["backlog_prefill_tokens"] == 2600
    on_b = frame.set_index("request_id").loc[2]
    assert on_b["num_requests_running"] == 7  # b's own sample, not a's later one


def test_a_request_at_a_sample_instant_sees_that_sample(two_replicas, requests_frame, request_rows):
    frame = build_training_frame(requests_frame([request_rows(1, 2.0)]), two_replicas)
    row = frame.iloc[0]
    assert row["num_requests_running"] == 5
    assert row["sample_age_s"] == 0.0
    # no prompt tokens in the last interval: the hit rate is 0, not a division by zero
    assert row["prompt_tokens_per_s"] == 0.0
    assert row["prefix_cache_hit_rate"] == 0.0


def test_first_sample_of_a_replica_has_zero_rates(two_replicas, requests_frame, request_rows):
    frame = build_training_frame(requests_frame([request_rows(1, 0.2)]), two_replicas)
    assert frame.iloc[0]["prompt_tokens_per_s"] == 0.0
    assert frame.iloc[0]["generation_tokens_per_s"] == 0.0


def test_failed_and_too_early_requests_are_excluded_and_counted(
    two_replicas, requests_frame, request_rows
):
    requests = requests_frame(
        [
            request_rows(1, 1.5),
            request_rows(2, 1.6, error="unfinished"),
            request_rows(3, 1.7, error="refused: no replica can serve", replica=None),
            request_rows(4, 0.1, replica="b", accelerator="A100-80G"),  # b's first is at 0.5
        ]
    )
    frame = build_training_frame(requests, two_replicas)
    assert list(frame["request_id"]) == [1]
    assert frame.attrs["excluded"] == {"error": 2, "no_prior_sample": 1}


def test_a_counter_that_restarts_counts_from_zero(
    samples_frame, sample_rows, requests_frame, request_rows
):
    samples = samples_frame(
        [
            sample_rows(0.0, prompt_tokens_total=5000),
            sample_rows(2.0, prompt_tokens_total=600),  # the replica restarted in between
        ]
    )
    frame = build_training_frame(requests_frame([request_rows(1, 2.5)]), samples)
    assert frame.iloc[0]["prompt_tokens_per_s"] == pytest.approx(300.0)


def test_bad_input_is_refused(two_replicas, requests_frame, request_rows):
    requests = requests_frame([request_rows(1, 1.5)]).drop(columns=["tenant"])
    with pytest.raises(InputError, match="tenant"):
        build_training_frame(requests, two_replicas)


def test_no_requests_give_an_empty_frame_with_the_columns(two_replicas, requests_frame):
    frame = build_training_frame(requests_frame([]), two_replicas)
    assert frame.empty and list(frame.columns) == TRAINING_COLUMNS
    assert frame.attrs["excluded"] == {"error": 0, "no_prior_sample": 0}


def test_no_requests_and_no_samples_give_an_empty_frame(
    requests_frame, samples_frame, two_replicas
):
    frame = build_training_frame(requests_frame([]), samples_frame([]))
    reference = build_training_frame(requests_frame([]), two_replicas)
    assert frame.empty and dict(frame.dtypes) == dict(reference.dtypes)


def test_the_oldest_wait_is_what_the_router_knows_when_it_routes(
    two_replicas, requests_frame, request_rows
):
    requests = requests_frame(
        [
            request_rows(1, 0.0, ttft_s=5.0),  # waits until 5.0 s for its first token
            request_rows(2, 1.0, ttft_s=1.5),  # until 2.5 s
            request_rows(3, 2.0),  # 1 waits since 0.0, 2 since 1.0: the oldest waited 2 s
            request_rows(4, 2.0, replica="b", accelerator="A100-80G"),  # nothing ahead on b
            request_rows(5, 5.0),  # 1's first token came at 5.0 s: nothing waits
            request_rows(6, 5.1, error="lost: reset"),  # never a first token: not counted
            request_rows(7, 5.3),  # 5 (first token at 5.2 s) is done; 6 is not counted
            request_rows(8, 5.3),  # routed after 7 at the same instant: 7 waited 0 s
        ]
    )
    frame = build_training_frame(requests, two_replicas).set_index("request_id")
    assert frame.loc[1, "backlog_oldest_wait_s"] == 0.0
    assert frame.loc[2, "backlog_oldest_wait_s"] == pytest.approx(1.0)
    assert frame.loc[3, "backlog_oldest_wait_s"] == pytest.approx(2.0)
    assert frame.loc[4, "backlog_oldest_wait_s"] == 0.0
    assert frame.loc[5, "backlog_oldest_wait_s"] == 0.0
    assert frame.loc[7, "backlog_oldest_wait_s"] == 0.0
    assert frame.loc[8, "backlog_oldest_wait_s"] == 0.0
    assert 6 not in frame.index


def test_the_routed_rate_counts_what_the_router_sent_the_replica_in_the_last_window(
    two_replicas, requests_frame, request_rows
):
    w = ROUTED_RATE_WINDOW_S
    requests = requests_frame(
        [
            request_rows(1, 0.0),  # the frame's first request: nothing before it
            request_rows(2, 0.5),  # 1 in the first 1 s (the shortest span a rate is taken over)
            request_rows(3, 0.5, replica="b", accelerator="A100-80G"),  # nothing sent to b
            request_rows(4, 4.0, error="lost: reset"),  # failed, but the router sent it
            request_rows(5, 8.0),  # 1, 2 and 4 over the 8 s since the first request
            request_rows(6, 8.0),  # routed after 5 at the same instant: 5 counts too
            request_rows(7, w + 3.5),  # 1 and 2 fell out of the window: 4, 5, 6 over w
        ]
    )
    frame = build_training_frame(requests, two_replicas).set_index("request_id")
    rate = frame["routed_requests_per_s"]
    assert rate[1] == 0.0
    assert rate[2] == pytest.approx(1.0)
    assert rate[3] == 0.0
    assert rate[5] == pytest.approx(3 / 8.0)
    assert rate[6] == pytest.approx(4 / 8.0)
    assert rate[7] == pytest.approx(3 / w)
    assert 4 not in rate.index
