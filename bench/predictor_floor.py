"""The error floor of the latency predictors: how much of the p50 MAPE is missing information?

The telemetry and time split are those of :mod:`bench.predictors`. Next to the decision-time
features (:data:`models.features.FEATURES`) every row gets *oracle* features that no router
has when it routes: what happened on the same replica, in the same simulator run, after the
request arrived. They come from the served requests' own records (arrival, first token =
arrival + TTFT, finish = arrival + e2e), vectorised with sorted clocks and ``searchsorted``.

Two oracle sets, because a window that ends at the request's own first token or finish
partly encodes the latency it is meant to explain (more arrivals fit in a longer wait):

* :data:`OUTCOME_ORACLE` — windows bounded by the request's own outcome: arrivals (and their
  uncached prompt tokens) after it and before its first token / its finish, the mean number
  of requests in flight while it waited, the realised mean decode batch while it decoded and
  the prefill tokens other requests started in that time, per second;
* :data:`FIXED_ORACLE` — the future in fixed horizons after arrival (:data:`HORIZONS_S`):
  arrivals, their prompt tokens and the mean number of *other* requests in flight. These do
  not know the request's own outcome.

Variants scored on the held-out 30%: ``standard`` (the shipped :class:`LatencyPredictor`),
``control`` (a plain LightGBM ``objective="quantile"``, α = 0.5, on the decision-time features)
and the same plain LightGBM with either oracle set appended (``oracle``, ``oracle_fixed``).
If the oracle's error falls far below the control's, the floor is information, not capacity.
Oracle counts see only served rows of the frames (failed requests and those before a
replica's first sample are not in them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import numpy.typing as npt
import pandas as pd

from bench.predictors import PROMPT_BUCKETS, PredictorBench, simulated_runs
from models.features import FEATURES, feature_matrix
from models.predictor import LatencyPredictor, arrival_order
from models.quantile import training_values
from placement.report import print_table, write_json

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

COLUMNS = ("target", "variant", "mape", "median_ape", "n")
LOAD_COLUMNS = ("target", "variant", "in_flight", "mape", "median_ape", "n")
PROMPT_COLUMNS = ("target", "variant", "prompt_tokens", "mape", "median_ape", "n")
RATIO_COLUMNS = ("target", "standard_mape", "oracle_fixed_mape", "ratio")
TARGETS = ("ttft", "tpot")
VARIANTS = ("standard", "control", "oracle", "oracle_fixed")
HORIZONS_S = (0.5, 2.0, 8.0)
# router's requests in flight on the replica at routing (backlog_requests): bucket → [lo, hi]
IN_FLIGHT_BUCKETS: dict[str, tuple[int, int]] = {
    "0": (0, 0),
    "1-3": (1, 3),
    "4-7": (4, 7),
    "8+": (8, 2**62),
}
OUTCOME_ORACLE = (
    "arrivals_before_first_token",
    "arrival_tokens_before_first_token",
    "arrivals_before_finish",
    "arrival_tokens_before_finish",
    "mean_in_flight_while_waiting",
    "mean_decode_batch",
    "prefill_tokens_per_s_while_decoding",
)
FIXED_ORACLE = tuple(
    f"{name}_next_{h:g}s"
    for h in HORIZONS_S
    for name in ("arrivals", "arrival_tokens", "mean_others_in_flight")
)
ORACLE_COLUMNS = OUTCOME_ORACLE + FIXED_ORACLE


# ---- oracle features ------------------------------------------------------------------------


def _seconds(times: pd.Series[Any], origin: pd.Timestamp) -> FloatArray:
    return np.asarray((times - origin).dt.total_seconds(), dtype=np.float64)


class _Clock:
    """One time axis for every (run, replica): group ``g``'s time ``t`` is ``g·span + t``, so a
    single sorted array and ``searchsorted`` answer per-replica questions for all rows at once."""

    def __init__(self, group: IntArray, span: float) -> None:
        self.group = group
        self.span = span

    def __call__(self, seconds: FloatArray) -> FloatArray:
        return self.group * self.span + seconds


def _step_integral(starts: FloatArray, ends: FloatArray) -> Callable[[FloatArray], FloatArray]:
    """``F(t)`` = ∫ (number of intervals [start, end) covering s) ds up to ``t``, on the clock."""
    times = np.concatenate([starts, ends])
    step = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.argsort(times, kind="stable")
    t, level = times[order], np.cumsum(step[order])
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(t))])

    def at(x: FloatArray) -> FloatArray:
        k = np.searchsorted(t, x, side="right") - 1
        safe = np.maximum(k, 0)
        return np.where(k < 0, 0.0, area[safe] + level[safe] * (x - t[safe]))

    return at


def _window_mean(
    integral: Callable[[FloatArray], FloatArray], start: FloatArray, end: FloatArray
) -> FloatArray:
    length = end - start
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(length > 0, (integral(end) - integral(start)) / length, np.nan)


def oracle_features(frame: pd.DataFrame) -> pd.DataFrame:
    """:data:`ORACLE_COLUMNS` for every row of ``frame`` (same index).

    Needs ``replica``, ``request_id``, ``arrival_time``, ``ttft_s``, ``e2e_s`` and
    ``uncached_tokens``; an optional ``run`` column keeps simulator runs apart (their clocks
    and replica names overlap). "After" a request means later in (arrival, request id) order
    on the same replica of the same run; "before" a time means strictly before it.
    """
    n = len(frame)
    if n == 0:
        return pd.DataFrame({c: np.empty(0) for c in ORACLE_COLUMNS}, index=frame.index)
    keys = ["run", "replica"] if "run" in frame.columns else ["replica"]
    group = np.asarray(frame.groupby(keys, sort=False).ngroup(), dtype=np.int64)
    origin = frame["arrival_time"].min()
    arrival = _seconds(frame["arrival_time"], origin)
    first = arrival + frame["ttft_s"].to_numpy(dtype=np.float64)
    finish = arrival + frame["e2e_s"].to_numpy(dtype=np.float64)
    tokens = frame["uncached_tokens"].to_numpy(dtype=np.float64)
    clock = _Clock(group, float(np.nanmax(finish)) + max(HORIZONS_S) + 1.0)

    order = np.lexsort((frame["request_id"].to_numpy(), arrival, group))
    arrivals_sorted = clock(arrival)[order]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    token_sum = np.concatenate([[0.0], np.cumsum(tokens[order])])

    def arrivals_before(end: FloatArray) -> tuple[FloatArray, FloatArray]:
        stop = np.maximum(np.searchsorted(arrivals_sorted, clock(end), side="left"), position + 1)
        return (stop - position - 1).astype(np.float64), token_sum[stop] - token_sum[position + 1]

    out: dict[str, FloatArray] = {}
    before_first = arrivals_before(first)
    before_finish = arrivals_before(finish)
    out["arrivals_before_first_token"], out["arrival_tokens_before_first_token"] = before_first
    out["arrivals_before_finish"], out["arrival_tokens_before_finish"] = before_finish

    in_flight = _step_integral(clock(arrival), clock(finish))
    decoding = _step_integral(clock(first), clock(finish))
    out["mean_in_flight_while_waiting"] = _window_mean(in_flight, clock(arrival), clock(first))
    out["mean_decode_batch"] = _window_mean(decoding, clock(first), clock(finish))

    # prefill work of other requests lands in this one's decode iterations (chunked prefill)
    by_first = np.argsort(clock(first), kind="stable")
    firsts_sorted = clock(first)[by_first]
    first_tokens = np.concatenate([[0.0], np.cumsum(tokens[by_first])])
    lo = np.searchsorted(firsts_sorted, clock(first), side="right")
    hi = np.searchsorted(firsts_sorted, clock(finish), side="right")
    decode_s = finish - first
    with np.errstate(invalid="ignore", divide="ignore"):
        out["prefill_tokens_per_s_while_decoding"] = np.where(
            decode_s > 0, (first_tokens[hi] - first_tokens[lo]) / decode_s, np.nan
        )

    for h in HORIZONS_S:
        count, prompt = arrivals_before(arrival + h)
        out[f"arrivals_next_{h:g}s"], out[f"arrival_tokens_next_{h:g}s"] = count, prompt
        # the request's own share of the window would say how long it stayed: leave it out
        own = np.clip(finish - arrival, 0.0, h) / h
        busy = _window_mean(in_flight, clock(arrival), clock(arrival + h))
        out[f"mean_others_in_flight_next_{h:g}s"] = busy - own
    return pd.DataFrame({c: out[c] for c in ORACLE_COLUMNS}, index=frame.index)


# ---- telemetry with run identity --------------------------------------------------------------


def tagged_frames(bench: PredictorBench) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`bench.predictors.simulated_frames` with the oracle columns (which count the
    trailing traffic after the window too: it is the future of the latest rows)."""
    runs = simulated_runs(bench)
    train, heldout = runs.train, runs.heldout
    both = pd.concat([train, heldout, runs.trailing], ignore_index=True)
    oracle = oracle_features(both)
    return (
        pd.concat([train, oracle.iloc[: len(train)].set_axis(train.index)], axis=1),
        pd.concat(
            [heldout, oracle.iloc[len(train) : len(train) + len(heldout)].set_axis(heldout.index)],
            axis=1,
        ),
    )


# ---- plain LightGBM quantile regression -------------------------------------------------------

PLAIN_PARAMS: dict[str, Any] = {
    "objective": "quantile",
    "alpha": 0.5,
    "metric": "quantile",
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 20,
    "lambda_l2": 1.0,
    "seed": 0,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "verbose": -1,
}
PLAIN_MAX_ROUNDS = 2000
PLAIN_EARLY_STOPPING = 50
STOP_SHARE = 0.2  # latest training rows that stop boosting, as LatencyPredictor's tail


def _design(frame: pd.DataFrame, extra: tuple[str, ...], ignored: tuple[str, ...]) -> FloatArray:
    base = training_values(feature_matrix(frame, source="predictor floor rows"), ignored)
    if not extra:
        return base
    return np.hstack([base, frame[list(extra)].to_numpy(dtype=np.float64)])


def _observed(frame: pd.DataFrame, target: str) -> FloatArray:
    return frame[f"{target}_s"].to_numpy(dtype=np.float64, na_value=np.nan)


def _valid(y: FloatArray) -> npt.NDArray[np.bool_]:
    return np.isfinite(y) & (y > 0)


def plain_p50(
    train: pd.DataFrame,
    heldout: pd.DataFrame,
    target: str,
    extra: tuple[str, ...],
    ignored: tuple[str, ...] = (),
) -> FloatArray:
    """Held-out p50 (s) of a plain LightGBM quantile regressor of log ``target`` (the median
    survives the log) on the decision-time features (but ``ignored``, held at 0 as the
    shipped predictor's settings say) plus the columns ``extra``."""
    y = _observed(train, target)
    valid = _valid(y)
    order = arrival_order(train)  # the predictor's own: the latest rows of every run stop it
    by_arrival = order[valid[order]]
    n_stop = max(1, round(len(by_arrival) * STOP_SHARE))
    fit, stop = by_arrival[:-n_stop], by_arrival[-n_stop:]
    x = _design(train, extra, ignored)
    names = [*FEATURES, *extra]
    data = lgb.Dataset(x[fit], np.log(y[fit]), feature_name=names)
    booster = lgb.train(
        PLAIN_PARAMS,
        data,
        num_boost_round=PLAIN_MAX_ROUNDS,
        valid_sets=[lgb.Dataset(x[stop], np.log(y[stop]), reference=data)],
        callbacks=[lgb.early_stopping(PLAIN_EARLY_STOPPING, verbose=False)],
    )
    raw = booster.predict(_design(heldout, extra, ignored), num_iteration=booster.best_iteration)
    return np.exp(np.asarray(raw, dtype=np.float64))


# ---- scoring ----------------------------------------------------------------------------------


def _score(y: FloatArray, p50: FloatArray) -> dict[str, Any]:
    ape = np.abs(p50 - y) / y
    if len(ape) == 0:
        return {"mape": float("nan"), "median_ape": float("nan"), "n": 0}
    return {"mape": float(np.mean(ape)), "median_ape": float(np.median(ape)), "n": len(ape)}


def score_by_prompt(
    heldout: pd.DataFrame, target: str, variant: str, p50: FloatArray
) -> list[dict[str, Any]]:
    """The variant's rows per prompt-length bucket (:data:`bench.predictors.PROMPT_BUCKETS`)."""
    y = _observed(heldout, target)
    ok = _valid(y)
    prompt = heldout["input_tokens"].to_numpy(dtype=np.float64)
    return [
        {
            "target": target,
            "variant": variant,
            "prompt_tokens": bucket,
            **_score(y[rows], p50[rows]),
        }
        for bucket, (lo, hi) in PROMPT_BUCKETS.items()
        for rows in [ok & (prompt >= lo) & (prompt < hi)]
    ]


def score_variant(
    heldout: pd.DataFrame, target: str, variant: str, p50: FloatArray
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The variant's overall row and its rows per bucket of requests in flight at routing."""
    y = _observed(heldout, target)
    ok = _valid(y)
    row = {"target": target, "variant": variant, **_score(y[ok], p50[ok])}
    in_flight = heldout["backlog_requests"].to_numpy(dtype=np.int64)
    by_load = [
        {
            "target": target,
            "variant": variant,
            "in_flight": bucket,
            **_score(y[rows], p50[rows]),
        }
        for bucket, (lo, hi) in IN_FLIGHT_BUCKETS.items()
        for rows in [ok & (in_flight >= lo) & (in_flight <= hi)]
    ]
    return row, by_load


def run_predictor_floor_bench(
    bench: PredictorBench, out: Path | None = None, *, progress: Any = None
) -> dict[str, Any]:
    """Score every variant, print both tables, write ``{"rows", "by_load"}`` to ``out``."""
    say = progress or (lambda _message: None)
    say("simulating telemetry and computing oracle features")
    train, heldout = tagged_frames(bench)
    say(f"training the standard predictor on {len(train)} rows")
    standard = LatencyPredictor(bench.predictor).fit(train).predict(heldout)
    extras = {"control": (), "oracle": OUTCOME_ORACLE, "oracle_fixed": FIXED_ORACLE}
    rows: list[dict[str, Any]] = []
    by_load: list[dict[str, Any]] = []
    by_prompt: list[dict[str, Any]] = []
    for target in TARGETS:
        predictions = {"standard": standard[f"{target}_p50"].to_numpy(dtype=np.float64)}
        for variant, extra in extras.items():
            say(f"training plain LightGBM ({variant}) for {target}")
            predictions[variant] = plain_p50(
                train, heldout, target, extra, bench.predictor.ignored_features
            )
        for variant in VARIANTS:
            row, loads = score_variant(heldout, target, variant, predictions[variant])
            rows.append(row)
            by_load += loads
            by_prompt += score_by_prompt(heldout, target, variant, predictions[variant])
    print_table(
        f"Predictor error floor: held-out p50 APE ({len(train)} training rows)", rows, COLUMNS
    )
    print_table("By requests in flight at routing (router's backlog)", by_load, LOAD_COLUMNS)
    print_table("By prompt length", by_prompt, PROMPT_COLUMNS)
    floor = {
        (r["target"], r["variant"]): r["mape"]
        for r in rows
        if r["variant"] in ("standard", "oracle_fixed")
    }
    ratios = [
        {
            "target": target,
            "standard_mape": floor[(target, "standard")],
            "oracle_fixed_mape": floor[(target, "oracle_fixed")],
            "ratio": floor[(target, "standard")] / floor[(target, "oracle_fixed")],
        }
        for target in TARGETS
    ]
    print_table("The shipped predictor against the decision-time floor", ratios, RATIO_COLUMNS)
    payload: dict[str, Any] = {
        "trailing_share": bench.trailing_share,
        "seed": bench.seed,
        "ignored_features": list(bench.predictor.ignored_features),
        "rows": rows,
        "floor_ratio": ratios,
        "by_load": by_load,
        "by_prompt": by_prompt,
        "oracle_columns": {"oracle": list(OUTCOME_ORACLE), "oracle_fixed": list(FIXED_ORACLE)},
    }
    if out is not None:
        write_json(out, payload)
    return payload
