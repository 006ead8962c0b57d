from __future__ import annotations

from bench.route_during_solve import _during_solve, _percentiles_ms, route_bodies


def test_only_requests_due_while_a_solve_ran_count() -> None:
    run = {
        "due": [0.5, 1.5, 2.5, 3.5],
        "latency": [0.001, 0.002, 0.003, 0.004],
        "solves": [{"start": 1.0, "end": 2.0}, {"start": 3.0, "end": 4.0}],
    }
    assert _during_solve(run) == [0.002, 0.004]


def test_percentiles_are_in_milliseconds() -> None:
    p50, p99 = _percentiles_ms([i / 1000 for i in range(1, 101)])
    assert (p50, p99) == (51.0, 100.0)


def test_load_and_window_share_their_prefixes() -> None:
    window = route_bodies(200, prefixes=10, seed=0)
    load = route_bodies(200, prefixes=10, seed=1)
    assert window != load
    firsts = {b["block_hashes"][0] for b in window}
    assert len(firsts) <= 10
    assert {b["block_hashes"][0] for b in load} <= firsts
    assert all(b["input_tokens"] == 512 * len(b["block_hashes"]) for b in window)
