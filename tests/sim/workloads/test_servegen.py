"""ServeGen sampling: shape, credits, determinism, rates and gap shapes, lengths, bad files."""

from __future__ import annotations

import ast
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from placement.errors import InputError
from placement.paths import repo_root, shared_data
from sim.workloads.servegen import SERVEGEN_DIR, load_servegen, servegen_client_rates
from sim.workloads.servegen_files import _plain_dict

SAMPLES = repo_root() / "data/samples/servegen"
SAMPLE_DIR = SAMPLES / "language/m-small"
# 6 h where both sample clients are busy: ~245k requests (see test_rate...).
LONG_START_S, LONG_SPAN_S = 279600.0, 21600.0


def trace_frame(client: int, directory: Path = SAMPLE_DIR) -> pd.DataFrame:
    return pd.read_csv(
        directory / f"chunk-{client}-trace.csv",
        header=None,
        names=["start", "rate", "cv", "family", "arg1", "arg2"],
    )


def expected_requests(client: int, start_s: float, span_s: float) -> float:
    """Σ rate × overlap of the client's windows with the period, computed independently."""
    frame = trace_frame(client)
    overlap = np.clip(
        np.minimum(frame.start + 600, start_s + span_s) - np.maximum(frame.start, start_s), 0, None
    )
    return float((frame.rate * overlap).sum())


def test_shape_tenants_and_credits() -> None:
    workload = load_servegen(duration_s=LONG_SPAN_S, start_s=LONG_START_S, seed=3, root=SAMPLES)
    arrivals = np.array([r.arrival_s for r in workload.requests])
    assert arrivals[0] == 0.0
    assert np.all(np.diff(arrivals) >= 0)
    assert arrivals[-1] < LONG_SPAN_S
    assert [r.id for r in workload.requests[:5]] == [0, 1, 2, 3, 4]
    assert workload.requests[-1].id == len(workload) - 1
    assert set(workload.tenants) == {"sg-1", "sg-13"}
    assert all(r.block_hashes == () and r.model == "" for r in workload.requests[:1000])
    expected = {c: expected_requests(c, LONG_START_S, LONG_SPAN_S) for c in (1, 13)}
    total = sum(expected.values())
    for client, count in expected.items():
        assert workload.tenants[f"sg-{client}"].credit_share == pytest.approx(count / total)


def test_rate_matches_the_trace_over_a_long_window() -> None:
    """Sampled counts ≈ Σ rate × overlap. The renewal variance Σ n_w·CV_w² of this period's
    gap shapes gives a relative sd of ~0.9% for the total and ~1.8% for client 1 (bursty
    Weibull windows), 0.4% for client 13: the tolerances are > 4 sd."""
    workload = load_servegen(duration_s=LONG_SPAN_S, start_s=LONG_START_S, seed=11, root=SAMPLES)
    counts = Counter(r.tenant for r in workload.requests)
    expected = {c: expected_requests(c, LONG_START_S, LONG_SPAN_S) for c in (1, 13)}
    assert len(workload) == pytest.approx(sum(expected.values()), rel=0.04)
    assert counts["sg-1"] == pytest.approx(expected[1], rel=0.08)
    assert counts["sg-13"] == pytest.approx(expected[13], rel=0.02)


def test_deterministic_for_a_seed() -> None:
    def columns(seed: int) -> list[tuple[float, int, int, str]]:
        w = load_servegen(duration_s=3600, start_s=LONG_START_S, seed=seed, root=SAMPLES)
        return [(r.arrival_s, r.input_tokens, r.output_tokens, r.tenant) for r in w.requests]

    first = columns(5)
    assert len(first) > 100
    assert columns(5) == first
    assert columns(6) != first


def test_a_client_stream_does_not_depend_on_the_others() -> None:
    alone = load_servegen(duration_s=3600, start_s=LONG_START_S, seed=2, clients=1, root=SAMPLES)
    both = load_servegen(duration_s=3600, start_s=LONG_START_S, seed=2, root=SAMPLES)
    assert set(alone.tenants) == {"sg-1"}
    mine = [r for r in both.requests if r.tenant == "sg-1"]
    assert np.diff([r.arrival_s for r in alone.requests]) == pytest.approx(
        np.diff([r.arrival_s for r in mine])
    )
    assert [r.input_tokens for r in alone.requests] == [r.input_tokens for r in mine]


def test_lengths_come_from_the_covering_window_pmf() -> None:
    """Client 13 uses its own 6 h PMF; client 1 (no dataset file) falls back to the pool of
    the others, here client 13's PMFs (nearest earlier window when the covering one is empty)."""
    raw = json.loads((SAMPLE_DIR / "chunk-13-dataset.json").read_text())
    start = 21600.0 * 2  # a window where client 13 has lengths
    pmf = ast.literal_eval(raw[str(int(start))]["input_tokens"])
    support_13 = set().union(*(ast.literal_eval(v["input_tokens"]) for v in raw.values()))
    workload = load_servegen(duration_s=21600, start_s=start, seed=1, root=SAMPLES)
    own = [r.input_tokens for r in workload.requests if r.tenant == "sg-13"]
    pooled = [r.input_tokens for r in workload.requests if r.tenant == "sg-1"]
    assert len(own) > 1000
    assert set(own) <= set(pmf)
    pmf_mean = sum(k * p for k, p in pmf.items())
    assert np.mean(own) == pytest.approx(pmf_mean, rel=0.05)
    assert set(pooled) <= support_13


def write_client(directory: Path, rows: list[str], client: int = 0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"chunk-{client}-trace.csv").write_text("".join(r + "\n" for r in rows))
    pmf = {"input_tokens": "{100: 0.5, 300: 0.5}", "output_tokens": "{7: 1.0}"}
    (directory / f"chunk-{client}-dataset.json").write_text(json.dumps({"0": pmf}))
    return directory


@pytest.mark.parametrize(
    ("family", "arg1", "arg2", "cv"),
    [
        ("Gamma", 0.25, 0.08, 2.0),  # arg2 consistent with the rate: mean = 0.25·0.08 = 1/50
        ("Weibull", 0.5, 0.5, math.sqrt(5.0)),  # arg2 off by 50x: the rate must win
        ("Exponential", 0.0, 0.0, 1.0),
    ],
)
def test_gaps_have_the_trace_rate_and_the_fitted_shape(
    tmp_path: Path, family: str, arg1: float, arg2: float, cv: float
) -> None:
    rows = [f"{600 * w},50,{cv},{family},{arg1},{arg2}" for w in range(12)]
    write_client(tmp_path / "c/m", rows)
    workload = load_servegen("c", "m", duration_s=7200, seed=0, root=tmp_path)
    gaps = np.diff([r.arrival_s for r in workload.requests])
    assert len(workload) == pytest.approx(50 * 7200, rel=0.04)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.04)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)
    assert {r.input_tokens for r in workload.requests} == {100, 300}
    assert {r.output_tokens for r in workload.requests} == {7}


def test_idle_clients_are_left_out(tmp_path: Path) -> None:
    directory = tmp_path / "c/m"
    write_client(directory, ["0,2,1,Exponential,0,0", "600,2,1,Exponential,0,0"], client=0)
    write_client(directory, ["0,0,0,,0,0", "600,0,0,,0,0"], client=1)
    workload = load_servegen("c", "m", duration_s=1200, seed=0, root=tmp_path, tenant_prefix="x")
    assert set(workload.tenants) == {"x-0"}
    assert workload.tenants["x-0"].credit_share == 1.0


@pytest.mark.parametrize(
    ("bad_row", "field"),
    [
        ("600,1.5,1,Lognormal,1,1", "family"),
        ("600,fast,1,Gamma,1,1", "rate_rps"),
        ("600,1.5,1,,0,0", "family"),  # active but no distribution
        ("600,1.5,1,Gamma,-1,1", "arg1"),
        ("600,-1,1,Gamma,1,1", "rate_rps"),
        ("300,1,1,Gamma,1,1", "window_start_s"),  # overlaps the previous window
        ("600,1,1,Gamma,1", None),
    ],
)
def test_malformed_trace_row_names_line_and_field(
    tmp_path: Path, bad_row: str, field: str | None
) -> None:
    directory = write_client(tmp_path / "c/m", ["0,1,1,Gamma,1,1", bad_row])
    with pytest.raises(InputError) as caught:
        load_servegen("c", "m", duration_s=600, seed=0, root=tmp_path)
    assert caught.value.line == 2
    assert caught.value.field == field
    assert str(directory / "chunk-0-trace.csv") in str(caught.value)


@pytest.mark.parametrize(
    "pmf_text", ["__import__('os')", "[1, 2]", "{1: -0.5}", "{'a': 1.0}", "{1: 0.0}"]
)
def test_malformed_length_pmf_names_the_window_field(tmp_path: Path, pmf_text: str) -> None:
    directory = write_client(tmp_path / "c/m", ["0,1,1,Gamma,1,1"])
    entry = {"input_tokens": pmf_text, "output_tokens": "{1: 1.0}"}
    (directory / "chunk-0-dataset.json").write_text(json.dumps({"0": entry}))
    with pytest.raises(InputError) as caught:
        load_servegen("c", "m", duration_s=600, seed=0, root=tmp_path)
    assert caught.value.field == "0.input_tokens"


def test_bad_requests_are_input_errors() -> None:
    with pytest.raises(InputError, match="language/m-small"):
        load_servegen("language", "m-huge", duration_s=60, seed=0, root=SAMPLES)
    with pytest.raises(InputError) as caught:
        load_servegen(duration_s=1e9, seed=0, root=SAMPLES)
    assert caught.value.field == "duration_s"
    with pytest.raises(InputError):
        load_servegen(duration_s=-5, seed=0, root=SAMPLES)


def test_rate_scale_scales_counts_and_keeps_credits() -> None:
    base = load_servegen(duration_s=7200, start_s=LONG_START_S, seed=4, root=SAMPLES)
    half = load_servegen(
        duration_s=7200, start_s=LONG_START_S, seed=4, root=SAMPLES, rate_scale=0.5
    )
    assert len(half) == pytest.approx(len(base) / 2, rel=0.05)
    assert half.tenants == base.tenants
    rates = servegen_client_rates(duration_s=7200, start_s=LONG_START_S, root=SAMPLES)
    assert sum(rates.values()) * 7200 == pytest.approx(len(base), rel=0.05)


@pytest.mark.skipif(not (shared_data() / SERVEGEN_DIR).is_dir(), reason="no shared data")
def test_real_categories_load() -> None:
    reason = load_servegen("reason", "deepseek-r1", duration_s=600, seed=0)
    small = load_servegen(duration_s=60, seed=0)
    assert 5_000 < len(reason) < 20_000  # ~15 requests/s in the first hour
    assert 30_000 < len(small) < 70_000  # ~800 requests/s
    assert sum(t.credit_share for t in small.tenants.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text",
    ["{}", " { 12: 0.5, 7:1e-05 ,3: 2 } ", "{1: 0.25, 1: 0.75}", "{0: 1}", "{2048: 0.1, 16: 0.9}"],
)
def test_the_quick_pmf_reading_agrees_with_the_literal_one(text: str) -> None:
    quick = _plain_dict(text)
    assert quick == {k: float(v) for k, v in ast.literal_eval(text).items()}
    assert all(isinstance(k, int) and isinstance(v, float) for k, v in (quick or {}).items())


@pytest.mark.parametrize(
    "text", ["{1: nan}", "{1: inf}", "{0x10: 1}", "{1: 0.5,}", "{'a': 1}", "[1, 2]", "{1: True}"]
)
def test_the_quick_pmf_reading_leaves_anything_else_to_the_literal_one(text: str) -> None:
    assert _plain_dict(text) is None
