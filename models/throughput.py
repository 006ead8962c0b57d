"""Throughput model: the output tokens per second a replica delivers at a load.

A LightGBM regressor (L2) of ``ln(1 + generation_tokens_per_s) − ln(1 + prior rate)``, the
prior rate being the roofline's (:func:`~models.roofline_prior.prior_generation_rate`), on the
replica's datasheet features, its load (running, waiting, KV use, prompt rate, hit rate) and
that prior; monotone (+1) in the number of running sequences and in the prior, so the predicted
rate never falls as more sequences run. Learning the correction to the prior rather than the
rate itself halved the median error on held-out simulator telemetry (0.20 → 0.13). Each
training row is a request's view of its replica (rows of the same scrape repeat, which weights
busy intervals by their traffic); the split is the latency models' (train on the head, stop
early on the tail). The correction is then scaled by the share ``shrink`` (0, 0.1, …, 1) that
improves most on the prior in the worse of its mean and its median error on the calibration rows
of the tail (the typical row and the tail both count): now that the prior is the
replica's own cost model, a correction learned on one load range can hurt at another, and
``shrink = 0`` keeps the prior.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from models.features import REPLICA_FEATURES, FeatureMatrix
from models.quantile import QuantileConfig, TimeSplit, booster_params, train_booster
from models.roofline_prior import FloatArray, prior_generation_rate

if TYPE_CHECKING:
    import lightgbm as lgb

_LOAD = (
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "prompt_tokens_per_s",
    "prefix_cache_hit_rate",
    "uncached_prompt_tokens_per_s",
)
THROUGHPUT_FEATURES: tuple[str, ...] = (*REPLICA_FEATURES, *_LOAD, "generation_prior_log1p")
_INCREASING = ("num_requests_running", "generation_prior_log1p")
_PRIOR = THROUGHPUT_FEATURES.index("generation_prior_log1p")
SHRINK_GRID = tuple(i / 10 for i in range(11))


def throughput_features(features: FeatureMatrix) -> FloatArray:
    """Columns of :data:`THROUGHPUT_FEATURES` for every row."""
    columns = [features.column(name) for name in (*REPLICA_FEATURES, *_LOAD)]
    columns.append(np.log1p(prior_generation_rate(features.inputs)))
    return np.column_stack(columns) if columns[0].size else np.empty((0, len(columns)))


def _params(config: QuantileConfig) -> dict[str, Any]:
    monotone = [1 if f in _INCREASING else 0 for f in THROUGHPUT_FEATURES]
    return {"objective": "regression", **booster_params(config, monotone)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputModel:
    """A fitted generation-throughput booster."""

    booster: lgb.Booster
    shrink: float = 1.0

    def predict(self, features: FeatureMatrix, *, num_threads: int = 1) -> FloatArray:
        """Predicted output tokens per second of each row's replica at its load (≥ 0)."""
        x = throughput_features(features)
        if len(x) == 0:
            return np.empty(0)
        return self._predict(x, self.shrink, num_threads)

    def _predict(self, x: FloatArray, shrink: float, num_threads: int = 1) -> FloatArray:
        raw = np.asarray(self.booster.predict(x, num_threads=num_threads), dtype=np.float64)
        return np.maximum(np.expm1(shrink * raw + x[:, _PRIOR]), 0.0)

    def to_text(self) -> str:
        return str(self.booster.model_to_string())

    @classmethod
    def from_text(cls, text: str, *, shrink: float = 1.0) -> ThroughputModel:
        import lightgbm as lgb

        return cls(booster=lgb.Booster(model_str=text), shrink=shrink)


def fit_throughput_model(
    features: FeatureMatrix, split: TimeSplit, config: QuantileConfig
) -> ThroughputModel:
    """Fit on ``split.train``, stopping early on ``split.stop`` (L2 on the log1p rate)."""
    import lightgbm as lgb

    x = throughput_features(features)
    y = np.log1p(features.generation_tokens_per_s) - x[:, _PRIOR]
    names = list(THROUGHPUT_FEATURES)
    train = lgb.Dataset(x[split.train], y[split.train], feature_name=names)
    stop = lgb.Dataset(x[split.stop], y[split.stop], reference=train)
    model = ThroughputModel(booster=train_booster(_params(config), train, stop, config))
    rows = split.calibrate[features.generation_tokens_per_s[split.calibrate] > 0]
    if len(rows) == 0:
        return model
    observed = features.generation_tokens_per_s[rows]

    def errors(shrink: float) -> tuple[float, float]:
        ape = np.abs(model._predict(x[rows], shrink) / observed - 1.0)
        return float(np.mean(ape)), float(np.median(ape))

    scored = {s: errors(s) for s in SHRINK_GRID}
    mean0, median0 = (max(v, 1e-12) for v in scored[0.0])

    def worse_of_two(s: float) -> float:  # relative to the prior: neither error may grow
        return max(scored[s][0] / mean0, scored[s][1] / median0)

    best = min(SHRINK_GRID, key=lambda s: (worse_of_two(s), -s))
    return ThroughputModel(booster=model.booster, shrink=best)
