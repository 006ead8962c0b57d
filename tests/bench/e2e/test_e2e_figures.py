"""Goodput, attainment and the summary from the load generator's records."""

from __future__ import annotations

import math

import pytest

from bench.e2e.figures import replay_row, summary, tpot_s
from bench.e2e.loadgen import Record


def _rec(ttft: float, latency: float, tokens: int, ok: bool = True) -> Record:
    return Record(
        ok=ok,
        start_s=0.0,
        ttft_s=ttft,
        tpot_s=float("nan"),
        latency_s=latency,
        output_tokens=tokens,
    )


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (_rec(1.0, 2.0, 11), 0.1),  # 10 gaps over 1 s
        (_rec(1.0, 1.0, 1), 0.0),  # one token: no decoding
        (_rec(0.5, 0.5, 0), 0.0),
    ],
)
def test_tpot_is_decode_time_per_token_after_the_first(record: Record, expected: float) -> None:
    assert tpot_s(record) == pytest.approx(expected)


def test_a_request_counts_only_when_it_completed_within_both_slos() -> None:
    records = [
        _rec(1.0, 2.0, 11),  # TTFT 1 s, TPOT 0.1 s: met
        _rec(2.5, 3.0, 11),  # TTFT over 2 s
        _rec(0.5, 20.5, 11),  # TPOT 2 s
        _rec(float("nan"), float("nan"), 0, ok=False),  # failed
    ]
    row = replay_row(
        "gateway",
        1.0,
        records,
        sent=5,  # one never came back at all
        window_s=2.0,
        ttft_slo_s=2.0,
        tpot_slo_s=0.1,
        cpu_s=0.01,
        idle_cores=0.001,
        wall_s=5.0,
    )
    assert row["goodput_rps"] == pytest.approx(0.5)
    assert row["attainment"] == pytest.approx(0.2)
    assert (row["completed"], row["failed"]) == (3, 2)
    assert row["ttft_p50_s"] == pytest.approx(1.0)
    assert row["cpu_us_per_request"] == pytest.approx(2000.0)
    assert row["cpu_us_per_request_busy"] == pytest.approx(1000.0)


def _trace(router: str, load: float, goodput: float, attainment: float) -> dict[str, object]:
    return {
        "router": router,
        "phase": "trace",
        "load": load,
        "goodput_rps": goodput,
        "attainment": attainment,
    }


def test_the_ratio_is_taken_where_sglang_router_first_drops_below_90_percent() -> None:
    rows = [
        _trace("sglang-router", 0.5, 5.0, 0.99),
        _trace("sglang-router", 1.0, 8.0, 0.85),
        _trace("sglang-router", 1.5, 6.0, 0.40),
        _trace("gateway", 0.5, 5.0, 1.0),
        _trace("gateway", 1.0, 10.0, 0.95),
        _trace("gateway", 1.5, 12.0, 0.8),
        _trace("epp", 1.0, 9.0, 0.9),
        {
            "router": "gateway",
            "phase": "probe",
            "added_latency_p50_ms": 0.8,
            "added_latency_p99_ms": 4.0,
            "cpu_us_per_request": 100.0,
        },
        {
            "router": "sglang-router",
            "phase": "probe",
            "added_latency_p50_ms": 0.3,
            "added_latency_p99_ms": 1.0,
            "cpu_us_per_request": 400.0,
        },
    ]
    out = summary(rows, probe_rate=500.0)
    assert out["ratio_load"] == 1.0
    assert out["sglang_router_knee_found"] is True
    assert out["ratio_vs_sglang_router"] == pytest.approx(1.25)
    assert out["ratio_ceiling"] == pytest.approx(1 / 0.85)
    assert (out["sglang_router_attainment"], out["gateway_attainment"]) == (0.85, 0.95)
    assert out["epp_ratio_vs_sglang_router"] == pytest.approx(9.0 / 8.0)
    assert out["epp_attainment"] == 0.9
    assert (out["added_latency_p50_ms"], out["added_latency_p99_ms"]) == (0.8, 4.0)
    assert out["cpu_ratio_vs_sglang_router"] == pytest.approx(0.25)


def test_without_a_knee_the_highest_load_is_compared_and_said_so() -> None:
    rows = [_trace("sglang-router", 0.5, 5.0, 0.99), _trace("gateway", 0.5, 5.5, 1.0)]
    out = summary(rows, probe_rate=500.0)
    assert out["sglang_router_knee_found"] is False
    assert out["ratio_vs_sglang_router"] == pytest.approx(1.1)
    assert out["added_latency_p50_ms"] is None
    assert not math.isnan(out["ratio_load"])
    assert out["ratio_ceiling"] == pytest.approx(1 / 0.99)
    assert out["epp_ratio_vs_sglang_router"] is None  # the picker was not run


def test_a_refused_request_is_sent_but_never_goodput() -> None:
    # the same answers, but the second router's gate refused two of the four requests (429):
    # its goodput and attainment fall with them, and no router can pass 1 / the attainment
    answered = [_rec(0.5, 1.5, 11) for _ in range(4)]
    refused = [*answered[:2], *(_rec(float("nan"), float("nan"), 0, ok=False) for _ in range(2))]
    rows = [
        replay_row(
            router,
            1.0,
            records,
            sent=4,
            window_s=2.0,
            ttft_slo_s=2.0,
            tpot_slo_s=0.1,
            cpu_s=None,
            idle_cores=None,
            wall_s=2.0,
        )
        for router, records in (("sglang-router", refused), ("gateway", answered))
    ]
    assert rows[0]["goodput_rps"] == pytest.approx(1.0) and rows[0]["attainment"] == 0.5
    assert rows[0]["failed"] == 2
    out = summary(rows, probe_rate=0.0)
    assert out["ratio_vs_sglang_router"] == pytest.approx(2.0) == out["ratio_ceiling"]
    assert rows[1]["goodput_rps"] <= rows[1]["rate_rps"]
