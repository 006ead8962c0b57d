"""`placement bench predictor-floor`: oracle features on a hand-built run, and the JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bench.predictor_floor import ORACLE_COLUMNS, VARIANTS, oracle_features
from placement.cli import app
from placement.paths import shared_data

START = pd.Timestamp("2026-01-01", tz="UTC")


def _requests(rows: list[tuple[int, str, float, float, float, int]]) -> pd.DataFrame:
    """(request id, replica, arrival s, TTFT s, e2e s, uncached prompt tokens) per request."""
    ids, replicas, arrivals, ttfts, e2es, tokens = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "request_id": ids,
            "replica": replicas,
            "arrival_time": [START + pd.Timedelta(seconds=s) for s in arrivals],
            "ttft_s": ttfts,
            "e2e_s": e2es,
            "uncached_tokens": tokens,
        }
    )


def test_arrivals_on_the_same_replica_before_the_first_token_are_counted() -> None:
    # a waits 1 s for its first token on r0; b lands on r0 while a waits, c on r1 meanwhile
    frame = _requests(
        [
            (0, "r0", 0.0, 1.0, 3.0, 100),
            (1, "r0", 0.5, 1.0, 2.5, 40),
            (2, "r1", 0.6, 0.2, 1.0, 7),
        ]
    )
    oracle = oracle_features(frame)
    assert list(oracle.columns) == list(ORACLE_COLUMNS)
    assert oracle["arrivals_before_first_token"].tolist() == [1.0, 0.0, 0.0]
    assert oracle["arrival_tokens_before_first_token"].tolist() == [40.0, 0.0, 0.0]
    assert oracle["arrivals_before_finish"].tolist() == [1.0, 0.0, 0.0]
    # a decodes over [1, 3) s, b over [1.5, 3) s: a's mean batch is (2 + 1.5) / 2
    assert oracle["mean_decode_batch"].tolist() == pytest.approx([1.75, 2.0, 1.0])
    # b's prompt reaches its first token (1.5 s) while a decodes: 40 tokens over 2 s
    assert oracle["prefill_tokens_per_s_while_decoding"].tolist() == pytest.approx([20.0, 0, 0])
    # in a's next 0.5 s nobody else is on r0; within 2 s b is, for 1.5 of them
    assert oracle["arrivals_next_0.5s"].tolist() == [0.0, 0.0, 0.0]
    assert oracle["mean_others_in_flight_next_2s"].tolist() == pytest.approx([0.75, 1.0, 0.0])


def test_runs_are_kept_apart_even_with_the_same_clock_and_replica_names() -> None:
    frame = _requests([(0, "r0", 0.0, 1.0, 2.0, 10), (0, "r0", 0.5, 1.0, 2.0, 10)])
    together = oracle_features(frame)
    apart = oracle_features(frame.assign(run=[0, 1]))
    assert together["arrivals_before_first_token"].tolist() == [1.0, 0.0]
    assert apart["arrivals_before_first_token"].tolist() == [0.0, 0.0]
    assert np.isfinite(apart.to_numpy()).all()


@pytest.mark.skipif(not (shared_data() / "traces/mooncake").exists(), reason="shared data missing")
def test_quick_bench_reports_every_variant(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    outcome = CliRunner().invoke(app, ["bench", "predictor-floor", "--quick", "--out", str(out)])
    assert outcome.exit_code == 0, outcome.output
    payload = json.loads(out.read_text())
    rows = payload["rows"]
    assert {(r["target"], r["variant"]) for r in rows} == {
        (t, v) for t in ("ttft", "tpot") for v in VARIANTS
    }
    assert {"standard", "control", "oracle"} <= set(VARIANTS)
    for row in rows:
        assert set(row) == {"target", "variant", "mape", "median_ape", "n"}
        assert row["n"] > 0 and row["mape"] >= 0.0
    buckets = {(r["target"], r["variant"], r["in_flight"]) for r in payload["by_load"]}
    assert len(buckets) == 2 * len(VARIANTS) * 4
    n_by_variant = {(r["target"], r["variant"]): r["n"] for r in rows}
    for (target, variant), n in n_by_variant.items():
        counted = [
            b["n"] for b in payload["by_load"] if (b["target"], b["variant"]) == (target, variant)
        ]
        assert sum(counted) == n
