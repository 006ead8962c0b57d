"""Log-space interpolation: exact at measured points, power laws between, linear/flat beyond."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sim.costmodel.interpolate import gemm_latency_many, loglog, loglog_many
from sim.costmodel.profiles import (
    Curve,
    OperatorProfile,
    ShapeNotProfiled,
    load_profile,
    profiles_root,
)

CURVE = Curve(xs=(1.0, 10.0, 100.0), ys=(2.0, 2.0, 20.0))


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (1.0, 2.0),  # measured points come back exactly
        (10.0, 2.0),
        (100.0, 20.0),
        (math.sqrt(10.0), 2.0),  # flat segment stays flat
        (math.sqrt(1000.0), math.sqrt(40.0)),  # log-midpoint of a power law: geometric mean
        (400.0, 80.0),  # above the grid: linear in x
        (0.5, 2.0),  # below the grid: held at the smallest measurement
    ],
)
def test_loglog_scalar(x, expected):
    assert loglog(CURVE, x) == pytest.approx(expected, rel=1e-12)


def test_loglog_many_matches_scalar():
    xs = np.asarray([0.5, 1.0, 3.0, 10.0, 31.0, 100.0, 400.0])
    assert loglog_many(CURVE, xs) == pytest.approx([loglog(CURVE, float(x)) for x in xs], rel=1e-12)


def _profile(gemm):
    ns = tuple(sorted({n for n, _ in gemm}))
    ks = tuple(sorted({k for _, k in gemm}))
    return OperatorProfile(
        name="synthetic",
        version="0",
        gemm=gemm,
        gemm_ns=ns,
        gemm_ks=ks,
        context_attention={},
        generation_attention={},
        all_reduce={},
        moe={},
    )


def test_gemm_is_a_power_law_between_columns():
    # latency ∝ n·k on a 2×2 grid: log-bilinear interpolation reproduces it exactly
    gemm = {
        (n, k): Curve(xs=(1.0, 1024.0), ys=(1e-9 * n * k, 1e-9 * n * k * 1024))
        for n in (1024, 4096)
        for k in (1024, 4096)
    }
    m = np.asarray([1.0, 32.0, 1024.0, 4096.0])
    got = gemm_latency_many(_profile(gemm), m, 2048, 3000)
    expected = 1e-9 * 2048 * 3000 * np.where(m > 1, m, 1.0)
    assert got == pytest.approx(expected, rel=1e-9)
    # above the grid in n: linear in n
    assert gemm_latency_many(_profile(gemm), m, 8192, 1024) == pytest.approx(
        2 * gemm_latency_many(_profile(gemm), m, 4096, 1024), rel=1e-12
    )


def test_gemm_missing_column_is_reported():
    gemm = {(1024, 1024): CURVE, (4096, 1024): CURVE, (1024, 4096): CURVE}
    with pytest.raises(ShapeNotProfiled, match="n=4096 k=4096"):
        gemm_latency_many(_profile(gemm), np.ones(1), 2048, 2048)


@pytest.mark.skipif(not profiles_root().is_dir(), reason="shared profiles not available")
@pytest.mark.parametrize("profile", ["h100_sxm", "a100_sxm"])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 8192, 8192), (48, 5120, 8192), (4096, 1024, 12288)])
def test_gemm_hits_measured_points_exactly(profile, m, n, k):
    path = next((profiles_root() / profile / "gemm" / "vllm").glob("*/gemm_perf.parquet"))
    raw = pd.read_parquet(path)
    rows = raw[(raw.gemm_dtype == "bfloat16") & (raw.m == m) & (raw.n == n) & (raw.k == k)]
    measured_s = float(rows.latency.min()) / 1e3
    got = gemm_latency_many(load_profile(profile), np.asarray([float(m)]), n, k)[0]
    assert got == pytest.approx(measured_s, rel=1e-9)
