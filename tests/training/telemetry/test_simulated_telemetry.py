"""A simulated run's telemetry in the two schemas, ready for the store and the training frame."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from placement.domain.adapters import LoraAdapter
from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import Request
from placement.errors import InputError
from sim.faults import Fault
from sim.simulator import SimConfig, Simulator
from sim.workloads.base import Workload
from training.dataset import build_training_frame
from training.telemetry.schema import (
    REQUEST_COLUMNS,
    REQUESTS_SCHEMA,
    SAMPLE_COLUMNS,
    empty_frame,
)
from training.telemetry.simulated import telemetry_frames
from training.telemetry.validate import validate_requests, validate_samples

SAMPLED = SimConfig(sample_interval_s=1.0)
START = datetime(2026, 2, 1, 23, 59, 50, tzinfo=UTC)  # a run crosses midnight


@pytest.fixture
def run(fleet, cost, policy, make_requests):
    def simulate(n=600, rate=30.0, config=SAMPLED, policy=policy):
        workload = Workload(name="random", requests=make_requests(n, rate), tenants={})
        return Simulator(fleet, policy, workload, cost_model=lambda s: cost, config=config).run()

    return simulate


def test_one_valid_row_per_request_with_latencies_from_the_outcome(run):
    result = run()
    requests, _ = telemetry_frames(result, start=START)
    validate_requests(requests)
    assert len(requests) == len(result.requests)
    by_id = requests.set_index("request_id")
    for r in result.requests[::50]:
        row = by_id.loc[r.id]
        assert row["arrival_time"] == pd.Timestamp(START) + pd.Timedelta(
            microseconds=round(r.arrival_s * 1e6)
        )
        assert row["ttft_s"] == pytest.approx(r.first_token_s - r.arrival_s)
        assert row["e2e_s"] == pytest.approx(r.finish_s - r.arrival_s)
        assert row["tpot_s"] == pytest.approx(
            (r.finish_s - r.first_token_s) / (r.output_tokens - 1)
        )
        assert row["replica"] == result.fleet.replicas[r.replica].id
        assert row["accelerator"] == "H100-SXM" and row["model"] == "llama-3-8b"
        assert row["cached_tokens"] == r.cached_tokens and row["error"] == ""
        assert row["backlog_requests"] == r.backlog_requests
        assert row["backlog_prefill_tokens"] == r.backlog_prefill_tokens
    # at 30 req/s the router sees requests already in flight on some replica
    assert (requests["backlog_requests"] > 0).any()
    assert (requests["backlog_prefill_tokens"] >= 0).all()
    # the day partitions the store makes are real
    assert requests["arrival_time"].dt.date.nunique() == 2


def test_ttft_less_slot_wait_leaves_out_each_requests_wait_for_a_lora_slot(cost, policy):
    h100 = {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
    one_slot = fleet_from_dict({"name": "lora", "replicas": [h100 | {"max_loras": 1}]})
    adapters = {n: LoraAdapter(name=n, base="llama-3-8b", rank=16) for n in ("x", "y")}
    reqs = [Request(i, i * 0.05, 300, 200, adapter="xy"[i % 2]) for i in range(20)]
    workload = Workload(name="w", requests=reqs, tenants={}, adapters=adapters)
    result = Simulator(one_slot, policy, workload, cost_model=lambda s: cost).run()
    waits = {r.id: r.slot_wait_s for r in result.requests}
    assert sum(w > 0 for w in waits.values()) >= 5  # one slot, two adapters: they take turns
    observed, _ = telemetry_frames(result, start=START)
    engine, _ = telemetry_frames(result, start=START, less_slot_wait=True)
    validate_requests(engine)
    gap = (observed["ttft_s"] - engine["ttft_s"]).to_numpy()
    assert gap == pytest.approx(observed["request_id"].map(waits).to_numpy())
    assert (engine["ttft_s"] > 0).all()
    rest = [c for c in observed.columns if c != "ttft_s"]
    pd.testing.assert_frame_equal(observed[rest], engine[rest])


def test_without_adapters_ttft_less_slot_wait_is_the_observed_ttft(run):
    result = run(n=200)
    observed, _ = telemetry_frames(result, start=START)
    engine, _ = telemetry_frames(result, start=START, less_slot_wait=True)
    pd.testing.assert_frame_equal(observed, engine)


def test_frames_have_the_schema_dtypes(run):
    requests, samples = telemetry_frames(run(n=100))
    assert dict(requests.dtypes) == dict(empty_frame(REQUEST_COLUMNS).dtypes)
    assert dict(samples.dtypes) == dict(empty_frame(SAMPLE_COLUMNS).dtypes)
    assert list(requests.columns) == REQUESTS_SCHEMA.names


def test_requests_cut_off_by_the_drain_horizon_are_unfinished_with_null_times(run):
    result = run(n=600, rate=200.0, config=SimConfig(drain_s=0.0))
    requests, samples = telemetry_frames(result, start=START)
    validate_requests(requests)
    cut = requests[requests["error"] == "unfinished"]
    assert len(cut) == sum(1 for r in result.requests if r.finish_s < 0)
    assert len(cut) > 0
    assert cut["finish_time"].isna().all() and cut["e2e_s"].isna().all()
    assert cut["tpot_s"].isna().all()
    assert samples.empty  # no sample interval was asked for


def test_refused_requests_keep_null_replica_and_error_text(run):
    class RefuseAll:
        name = "refuse-all"

        def route(self, req, views, now):
            return -1

        def on_first_token(self, req, replica, now):
            pass

        def on_complete(self, req, replica, now):
            pass

    requests, _ = telemetry_frames(run(n=20, policy=RefuseAll()))
    validate_requests(requests)
    assert requests["replica"].isna().all() and requests["tp"].isna().all()
    assert requests["error"].str.startswith("refused").all()
    assert requests["ttft_s"].isna().all()


def test_single_token_outputs_have_no_tpot(fleet, cost, policy, make_requests):
    reqs = make_requests(50, 10.0)
    for r in reqs:
        r.output_tokens = 1
    workload = Workload(name="one-token", requests=reqs, tenants={})
    result = Simulator(fleet, policy, workload, cost_model=lambda s: cost).run()
    requests, _ = telemetry_frames(result)
    assert requests["tpot_s"].isna().all() and requests["ttft_s"].notna().all()


def test_samples_follow_the_replica_and_histograms_count_what_was_observed(run):
    result = run()
    requests, samples = telemetry_frames(result, start=START)
    validate_samples(samples)
    live = [s for s in result.samples if s.alive]
    assert len(samples) == len(live)
    assert set(samples["replica"]) == {r.id for r in result.fleet.replicas}
    # the TTFT histogram's count at each sample = that replica's first tokens by then
    for _, s in samples.iloc[::37].iterrows():
        on_replica = requests[requests["replica"] == s["replica"]]
        seen = on_replica[on_replica["first_token_time"] <= s["time"]]
        assert s["ttft_seconds_count"] == len(seen)
        assert s["ttft_seconds_sum"] == pytest.approx(seen["ttft_s"].sum(), abs=1e-5)
    for _, per_replica in samples.groupby("replica"):
        assert per_replica["generation_tokens_total"].is_monotonic_increasing
        assert per_replica["tpot_seconds_count"].is_monotonic_increasing


def test_a_dead_replica_has_no_samples_while_down(run):
    config = SimConfig(
        sample_interval_s=1.0, faults=(Fault(at_s=5.0, replica="h100-1", kind="kill"),)
    )
    _, samples = telemetry_frames(run(config=config), start=START)
    dead = samples[samples["replica"] == "h100-1"]
    assert dead["time"].max() <= pd.Timestamp(START) + pd.Timedelta(seconds=5)
    assert (samples["replica"] != "h100-1").sum() > len(dead)


def test_the_frames_feed_the_training_frame(run):
    requests, samples = telemetry_frames(run(), start=START)
    frame = build_training_frame(requests, samples)
    assert len(frame) + sum(frame.attrs["excluded"].values()) == len(requests)
    assert (frame["sample_age_s"] >= 0).all() and (frame["sample_age_s"] < 1.2).all()
    assert (frame["prefix_cache_hit_rate"].between(0, 1)).all()
    assert frame["generation_tokens_per_s"].max() > 0


def test_a_naive_start_time_is_refused(run):
    with pytest.raises(InputError, match="time zone"):
        telemetry_frames(run(n=10), start=datetime(2026, 1, 1) + timedelta(0))


@pytest.mark.parametrize(("load", "interval"), [(0.0, 1.0), (1.0, 0.0)])
def test_a_telemetry_run_needs_a_positive_load_and_interval(fleet, make_requests, load, interval):
    from training.telemetry.simulated import simulate_for_telemetry

    workload = Workload(name="random", requests=make_requests(10, 5.0), tenants={})
    with pytest.raises(InputError):
        simulate_for_telemetry(workload, fleet, load=load, sample_interval_s=interval)
