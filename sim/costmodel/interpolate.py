"""Interpolation between measured grid points, in log space.

Kernel latencies follow power laws piecewise (flat when launch-bound, linear in the work when
bandwidth- or compute-bound), so interpolating ``log latency`` linearly in ``log x`` is exact at
the measured points and follows either regime between them.

Beyond the grid:

- **above** the largest measured value the latency is extrapolated *linearly* in that variable
  (``y_max · x / x_max``): past the grid every operator here is throughput-bound, so its time grows
  in proportion to the work;
- **below** the smallest measured value it is held *flat* (``y_min``): smaller calls are
  launch-bound and cannot get faster than the smallest one measured.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import numpy.typing as npt

from sim.costmodel.profiles import Curve, OperatorProfile, ShapeNotProfiled

FloatArray = npt.NDArray[np.float64]


def loglog(curve: Curve, x: float) -> float:
    """Latency (s) of ``curve`` at ``x`` (> 0): log-log interpolation, linear/flat beyond."""
    xs, ys = curve.xs, curve.ys
    if x >= xs[-1]:
        return ys[-1] * x / xs[-1]
    if x <= xs[0]:
        return ys[0]
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    if x == x0:
        return y0
    w = math.log(x / x0) / math.log(x1 / x0)
    return math.exp((1.0 - w) * math.log(y0) + w * math.log(y1))


def loglog_many(curve: Curve, x: FloatArray) -> FloatArray:
    """Vectorised :func:`loglog` over an array of ``x`` (> 0)."""
    xs = np.asarray(curve.xs, dtype=np.float64)
    ys = np.asarray(curve.ys, dtype=np.float64)
    inside = np.exp(np.interp(np.log(x), np.log(xs), np.log(ys)))
    return np.where(x > xs[-1], ys[-1] * x / xs[-1], inside)


def _bracket(grid: tuple[int, ...], value: int) -> list[tuple[int, float, float]]:
    """Grid points around ``value`` as [(point, log-weight, linear scale)].

    Inside the grid: the two neighbours with log-space weights. Above: the largest point scaled
    linearly. Below: the smallest point, held flat.
    """
    if value >= grid[-1]:
        return [(grid[-1], 1.0, value / grid[-1])]
    if value <= grid[0]:
        return [(grid[0], 1.0, 1.0)]
    i = bisect.bisect_left(grid, value)
    if grid[i] == value:
        return [(value, 1.0, 1.0)]
    lo, hi = grid[i - 1], grid[i]
    w = math.log(value / lo) / math.log(hi / lo)
    return [(lo, 1.0 - w, 1.0), (hi, w, 1.0)]


def gemm_latency_many(profile: OperatorProfile, m: FloatArray, n: int, k: int) -> FloatArray:
    """Latency (s) of an ``m×k @ k×n`` bf16 GEMM for every ``m`` in the array.

    Log-linear in ``m`` along each measured ``(n, k)`` column, then bilinear in ``(log n, log k)``
    between the four neighbouring columns; linear in ``n`` or ``k`` above the grid.
    Raises :class:`ShapeNotProfiled` when a neighbouring column was not measured.
    """
    log_latency = np.zeros_like(m, dtype=np.float64)
    for n_point, wn, sn in _bracket(profile.gemm_ns, n):
        for k_point, wk, sk in _bracket(profile.gemm_ks, k):
            curve = profile.gemm.get((n_point, k_point))
            if curve is None:
                raise ShapeNotProfiled(
                    f"profile '{profile.name}' has no GEMM column n={n_point} k={k_point} "
                    f"(needed for n={n} k={k})"
                )
            log_latency += wn * wk * np.log(loglog_many(curve, m) * sn * sk)
    return np.exp(log_latency)
