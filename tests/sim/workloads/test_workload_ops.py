"""Workload.scaled / window / split on a real sample (the loaders' output must support them)."""

from __future__ import annotations

import pytest

from placement.paths import repo_root
from sim.workloads.mooncake import load_mooncake

SAMPLE = repo_root() / "data/samples/mooncake/conversation_trace_first300.jsonl"


def test_scaled_compresses_time_and_keeps_everything_else() -> None:
    workload = load_mooncake(SAMPLE)
    fast = workload.scaled(2.0)
    assert len(fast) == len(workload)
    assert fast.duration_s == pytest.approx(workload.duration_s / 2)
    for a, b in zip(workload.requests, fast.requests, strict=True):
        assert b.arrival_s == pytest.approx(a.arrival_s / 2)
        assert (b.id, b.input_tokens, b.block_hashes) == (a.id, a.input_tokens, a.block_hashes)
        assert b is not a
    with pytest.raises(ValueError, match="positive"):
        workload.scaled(0.0)


def test_window_retimes_to_zero() -> None:
    workload = load_mooncake(SAMPLE)
    start, end = 20.0, 60.0
    inside = [r for r in workload.requests if start <= r.arrival_s < end]
    window = workload.window(start, end)
    assert len(window) == len(inside) > 0
    assert [r.arrival_s for r in window.requests] == pytest.approx(
        [r.arrival_s - start for r in inside]
    )
    assert workload.requests[0].arrival_s == 0.0  # the original is untouched


def test_split_is_by_time_and_loses_nothing() -> None:
    workload = load_mooncake(SAMPLE)
    head, tail = workload.split(0.5)
    assert len(head) + len(tail) == len(workload)
    cut = 0.5 * workload.duration_s
    assert all(r.arrival_s < cut for r in head.requests)
    assert [r.id for r in head.requests + tail.requests] == list(range(len(workload)))
    assert tail.requests[0].arrival_s == pytest.approx(workload.requests[len(head)].arrival_s - cut)
