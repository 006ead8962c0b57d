"""The latency predictor bundle and the roofline baseline it must beat.

:class:`LatencyPredictor` holds four quantile boosters (TTFT and TPOT, p50 and p95) and a
throughput booster. Saved as a directory: one LightGBM model text per booster and
``manifest.json`` (feature lists, calibration offsets, training window, library versions) —
no pickles. :class:`RooflineBaseline` answers the same ``predict`` from the prior alone.
Both satisfy :class:`LatencyModel`, which is what capacity at SLO and the route path consume.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.features import (
    FEATURES,
    ROUTER_COLUMNS,
    FeatureMatrix,
    RowInputs,
    feature_matrix,
    features_of,
)
from models.group_calibration import GroupCalibration, fit_group_calibration
from models.quantile import (
    LOG_LATENCY,
    QUANTILES,
    TARGETS,
    QuantileConfig,
    QuantileModel,
    Target,
    fit_target,
    model_name,
    prior_of,
    time_split,
)
from models.roofline_prior import FloatArray, PriorLatency, prior_latency
from models.throughput import THROUGHPUT_FEATURES, ThroughputModel, fit_throughput_model
from placement.errors import InputError, PlacementError

LATENCY_COLUMNS = ("ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95")
OBSERVED_COLUMNS: dict[Target, str] = {"ttft": "ttft_s", "tpot": "tpot_s"}
MANIFEST = "manifest.json"
FORMAT_VERSION = 1
THROUGHPUT_FILE = "throughput.txt"
# The uncalibrated baseline's p95 as a multiple of its p50 (the prior has no spread of its own).
BASELINE_P95_FACTOR = 2.0
# Measured rows (a lab's benchmark of an idle replica, e.g. Splitwise) carry this share of the
# training loss in total, whatever their count: a few hundred real rows would otherwise drown
# in tens of thousands of simulated ones, yet they alone say how the real serving stack runs.
MEASUREMENT_WEIGHT_SHARE = 0.5


class PredictorNotFitted(PlacementError):
    """A predictor was asked for predictions before it was fitted or loaded."""


#: Predicted quantiles by :data:`LATENCY_COLUMNS` name, one value per row.
LatencyArrays = dict[str, FloatArray]


class LatencyModel(Protocol):
    """Anything that predicts p50/p95 TTFT and TPOT (s) for rows of :data:`INPUT_COLUMNS`."""

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Columns :data:`LATENCY_COLUMNS`, one row per input row, same index."""
        ...

    def predict_rows(self, rows: RowInputs) -> LatencyArrays:
        """The same for rows already validated (no table in or out: the capacity solver's
        inner loop)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineBaseline:
    """Predictions from the roofline prior alone: ``quantile = factor × prior``.

    The default factors are the uncalibrated datasheet baseline (p50 = the prior, p95 =
    :data:`BASELINE_P95_FACTOR` × it); :meth:`calibrated` fits the four factors to telemetry
    (the observed/prior ratio's median and 95th percentile) — a stronger baseline.
    """

    ttft_p50: float = 1.0
    ttft_p95: float = BASELINE_P95_FACTOR
    tpot_p50: float = 1.0
    tpot_p95: float = BASELINE_P95_FACTOR

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        features = feature_matrix(frame, source="prediction rows")
        return pd.DataFrame(self._quantiles(features), index=frame.index)

    def predict_rows(self, rows: RowInputs) -> LatencyArrays:
        # the prior is all this model reads of the features: skip building the rest
        return self._scaled(prior_latency(rows.prior))

    def _quantiles(self, features: FeatureMatrix) -> LatencyArrays:
        return self._scaled(features.prior)

    def _scaled(self, prior: PriorLatency) -> LatencyArrays:
        ttft, tpot = prior.ttft_s, prior.tpot_s
        return {
            "ttft_p50": ttft * self.ttft_p50,
            "ttft_p95": ttft * self.ttft_p95,
            "tpot_p50": tpot * self.tpot_p50,
            "tpot_p95": tpot * self.tpot_p95,
        }

    @classmethod
    def calibrated(cls, frame: pd.DataFrame) -> RooflineBaseline:
        """Factors fitted on ``frame`` (rows with observed ``ttft_s`` and ``tpot_s``)."""
        features = feature_matrix(frame, source="training frame")
        factors: dict[str, float] = {}
        for target in TARGETS:
            observed = _observed(frame, target)
            ok = _valid(observed)
            ratio = observed[ok] / prior_of(features, target)[ok]
            for alpha in QUANTILES:
                factors[model_name(target, alpha)] = float(np.quantile(ratio, alpha))
        return cls(**factors)


def _with_router_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the router's counters it lacks as 0 (unknown), so that two tables can be
    stacked without leaving gaps in them."""
    missing = {c: 0 for c in ROUTER_COLUMNS if c not in frame.columns}
    return frame.assign(**missing) if missing else frame


def _measurement_weight(telemetry_rows: int, measured_rows: int) -> float:
    """Per-row weight giving ``measured_rows`` :data:`MEASUREMENT_WEIGHT_SHARE` of the loss."""
    if measured_rows == 0:
        return 1.0
    share = MEASUREMENT_WEIGHT_SHARE
    return share / (1.0 - share) * telemetry_rows / measured_rows


def _observed(frame: pd.DataFrame, target: Target) -> FloatArray:
    column = OBSERVED_COLUMNS[target]
    if column not in frame.columns:
        raise InputError(f"missing column {column}", field=column, expected="observed latency (s)")
    try:
        return frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        raise InputError("not numeric", field=column, expected="seconds") from None


def _valid(observed: FloatArray) -> npt.NDArray[np.bool_]:
    """Rows whose observed latency can train or score a model (finite and positive)."""
    return np.isfinite(observed) & (observed > 0.0)


def _arrival_order(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
    if "arrival_time" not in frame.columns:
        raise InputError(
            "missing column arrival_time",
            field="arrival_time",
            expected="arrival timestamps (the validation tail is the latest rows)",
        )
    arrival = frame["arrival_time"]
    if arrival.isna().any():
        raise InputError(
            f"{int(arrival.isna().sum())} of {len(arrival)} rows have no arrival time",
            field="arrival_time",
            expected="a timestamp on every row",
        )
    return arrival_order(frame)


STREAM_COLUMN = "run"


def arrival_order(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Rows in time order, so that the last share of it is the latest share of the telemetry.

    One stream: by arrival time. Several independent streams pooled (a ``run`` column, e.g.
    simulator runs whose clocks all start at zero): by each row's position within its own
    stream (the fraction of that stream's rows before it), so the stopping and calibration tail
    holds the latest rows of every stream rather than the ends of the longest ones.
    """
    arrival = frame["arrival_time"]
    if STREAM_COLUMN not in frame.columns:
        return np.argsort(arrival.to_numpy(), kind="stable").astype(np.int64)
    position = arrival.groupby(frame[STREAM_COLUMN].to_numpy()).rank(method="first", pct=True)
    key = np.lexsort((arrival.to_numpy(), position.to_numpy()))
    return np.asarray(key, dtype=np.int64)


class LatencyPredictor:
    """p50/p95 TTFT and TPOT quantile models plus a throughput model, fitted together."""

    def __init__(self, config: QuantileConfig | None = None) -> None:
        self.config = config or QuantileConfig()
        self.models: dict[str, QuantileModel] = {}
        self.throughput: ThroughputModel | None = None
        self.training: dict[str, Any] = {}
        # per upper-quantile model (ttft_p95, …): its factors per decision-time group
        self.group_calibration: dict[str, GroupCalibration] = {}

    @property
    def is_fitted(self) -> bool:
        return len(self.models) == len(TARGETS) * len(QUANTILES) and self.throughput is not None

    def fit(self, frame: pd.DataFrame, *, measurements: pd.DataFrame | None = None) -> Self:
        """Fit every model on a training frame (see :mod:`models.quantile` for the split).

        ``measurements``: optional rows measured outside the telemetry (same columns, no
        meaningful arrival time). They join the latency models' training head, never the
        stopping or calibration tail, weighted to :data:`MEASUREMENT_WEIGHT_SHARE` of the
        training loss; the throughput model ignores them (they have no replica rates)."""
        n = len(frame)
        extra = 0 if measurements is None else len(measurements)
        rows_frame = (
            frame
            if measurements is None or not extra
            else pd.concat(
                [_with_router_columns(frame), _with_router_columns(measurements)],
                ignore_index=True,
            )
        )
        features = feature_matrix(rows_frame, source="training frame")
        order = _arrival_order(frame)
        measured = np.arange(n, n + extra, dtype=np.int64)
        models: dict[str, QuantileModel] = {}
        groups: dict[str, GroupCalibration] = {}
        rows: dict[str, int] = {}
        for target in TARGETS:
            observed = _observed(rows_frame, target)
            ok = _valid(observed)
            split = time_split(order[ok[order]], self.config.tail_share)
            weight = None
            if extra:
                usable = measured[ok[measured]]
                weight = np.ones(n + extra)
                weight[usable] = _measurement_weight(len(split.train), len(usable))
                split = dataclasses.replace(split, train=np.concatenate([split.train, usable]))
            rows[target] = int(ok.sum())
            fitted = fit_target(
                features, observed, split, target=target, config=self.config, weight=weight
            )
            for alpha, model in fitted.items():
                models[model_name(target, alpha)] = model
            if target in self.config.group_calibration:
                rows_ = split.calibrate
                if self.config.group_calibration_rows == "tail":
                    rows_ = np.concatenate([split.stop, split.calibrate])
                for alpha, model in fitted.items():
                    if alpha <= 0.5:
                        continue
                    calibration = features.take(rows_)
                    residual = np.log(observed[rows_]) - np.log(model.predict(calibration))
                    groups[model_name(target, alpha)] = fit_group_calibration(
                        residual, calibration, alpha
                    )
        self.models = models
        self.group_calibration = groups
        self.throughput = fit_throughput_model(
            features, time_split(order, self.config.tail_share), self.config
        )
        arrival = frame["arrival_time"]
        self.training = {
            "rows": rows,
            "measured_rows": extra,
            "first_arrival": str(arrival.min()),
            "last_arrival": str(arrival.max()),
            "accelerators": sorted(str(a) for a in frame["accelerator"].unique()),
        }
        return self

    def _require_fitted(self) -> ThroughputModel:
        if not self.is_fitted or self.throughput is None:
            raise PredictorNotFitted("the latency predictor has not been fitted or loaded")
        return self.throughput

    def predict_features(self, features: FeatureMatrix) -> pd.DataFrame:
        """Quantiles for an already built feature matrix (p95 never below p50)."""
        return pd.DataFrame(self._quantiles(features))

    def predict_rows(self, rows: RowInputs) -> LatencyArrays:
        return self._quantiles(features_of(rows))

    def _quantiles(self, features: FeatureMatrix) -> LatencyArrays:
        self._require_fitted()
        threads = self.config.predict_threads
        out = {name: m.predict(features, num_threads=threads) for name, m in self.models.items()}
        for name, calibration in self.group_calibration.items():
            out[name] = out[name] * np.exp(calibration.log_shift(features))
        for target in TARGETS:
            p50, p95 = f"{target}_p50", f"{target}_p95"
            out[p95] = np.maximum(out[p95], out[p50])
        return {c: out[c] for c in LATENCY_COLUMNS}

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """p50/p95 TTFT and TPOT in seconds, columns :data:`LATENCY_COLUMNS`, same index."""
        self._require_fitted()
        result = self.predict_features(feature_matrix(frame, source="prediction rows"))
        result.index = frame.index
        return result

    def predict_throughput(self, frame: pd.DataFrame) -> FloatArray:
        """Output tokens per second each row's replica delivers at its load."""
        model = self._require_fitted()
        features = feature_matrix(frame, source="prediction rows")
        return model.predict(features, num_threads=self.config.predict_threads)

    def metrics(self, frame: pd.DataFrame) -> dict[str, Any]:
        """Accuracy on ``frame`` (see :func:`latency_metrics`)."""
        return latency_metrics(self, frame)

    # ---- persistence -----------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write the model texts and ``manifest.json`` into ``directory`` (created)."""
        throughput = self._require_fitted()
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        entries = {}
        for name, model in self.models.items():
            file = f"{name}.txt"
            (out / file).write_text(model.to_text())
            entries[name] = {
                "file": file,
                "target": model.target,
                "alpha": model.alpha,
                "mode": model.mode,
                "base": model.base,
                "offset": model.offset,
                "prompt_offsets": list(model.prompt_offsets),
            }
            if name in self.group_calibration:
                entries[name]["group_calibration"] = self.group_calibration[name].to_json()
        (out / THROUGHPUT_FILE).write_text(throughput.to_text())
        manifest = {
            "format_version": FORMAT_VERSION,
            "features": list(FEATURES),
            "throughput_features": list(THROUGHPUT_FEATURES),
            "config": asdict(self.config),
            "quantile_models": entries,
            "throughput_model": THROUGHPUT_FILE,
            "throughput_shrink": throughput.shrink,
            "training": self.training,
            "versions": {pkg: _version(pkg) for pkg in ("placement", "lightgbm", "numpy")},
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> LatencyPredictor:
        """Read a directory written by :meth:`save`; InputError if it is not one."""
        root = Path(directory)
        manifest = _read_manifest(root / MANIFEST)
        source = str(root / MANIFEST)
        known = {f.name for f in fields(QuantileConfig)}
        try:
            config = QuantileConfig(**{k: v for k, v in manifest["config"].items() if k in known})
            predictor = cls(config)
            for name, entry in manifest["quantile_models"].items():
                predictor.models[name] = QuantileModel.from_text(
                    _read_text(root / entry["file"]),
                    target=entry["target"],
                    alpha=float(entry["alpha"]),
                    # before the mode was chosen per target, the config named one
                    mode=entry.get("mode", manifest["config"].get("mode", LOG_LATENCY)),
                    base=float(entry["base"]),
                    offset=float(entry["offset"]),
                    prompt_offsets=tuple(float(x) for x in entry.get("prompt_offsets", [])),
                )
                if "group_calibration" in entry:
                    predictor.group_calibration[name] = GroupCalibration.from_json(
                        entry["group_calibration"]
                    )
            predictor.throughput = ThroughputModel.from_text(
                _read_text(root / manifest["throughput_model"]),
                shrink=float(manifest.get("throughput_shrink", 1.0)),
            )
            predictor.training = dict(manifest.get("training", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"malformed manifest ({exc!s})", source=source, expected="a manifest from save()"
            ) from None
        if not predictor.is_fitted:
            raise InputError(
                "the manifest does not list every quantile model",
                source=source,
                field="quantile_models",
                expected=", ".join(LATENCY_COLUMNS),
            )
        return predictor


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read model file: {exc.strerror}", source=str(path)) from None


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError("not valid JSON", source=str(path), line=exc.lineno) from None
    if not isinstance(manifest, dict):
        raise InputError("not a manifest", source=str(path), expected="a JSON object")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise InputError(
            f"format version {manifest.get('format_version')!r}",
            source=str(path),
            field="format_version",
            expected=str(FORMAT_VERSION),
        )
    for key, names in (("features", FEATURES), ("throughput_features", THROUGHPUT_FEATURES)):
        if manifest.get(key) != list(names):
            raise InputError(
                "the model was trained on other features than this code builds",
                source=str(path),
                field=key,
                expected=", ".join(names),
            )
    return manifest


# ---- accuracy -----------------------------------------------------------------------------


def pinball_loss(observed: FloatArray, predicted: FloatArray, alpha: float) -> float:
    """Mean quantile (pinball) loss of ``predicted`` as the ``alpha``-quantile (s)."""
    diff = observed - predicted
    return float(np.mean(np.maximum(alpha * diff, (alpha - 1.0) * diff)))


def _scores(observed: FloatArray, p50: FloatArray, p95: FloatArray) -> dict[str, float]:
    ape = np.abs(p50 - observed) / observed
    return {
        "rows": float(len(observed)),
        "mape_p50": float(np.mean(ape)),
        "mdape_p50": float(np.median(ape)),
        "pinball_p50": pinball_loss(observed, p50, 0.5),
        "pinball_p95": pinball_loss(observed, p95, 0.95),
        "coverage_p95": float(np.mean(observed <= p95)),
    }


def latency_metrics(model: LatencyModel, frame: pd.DataFrame) -> dict[str, Any]:
    """Accuracy of ``model`` on the rows of ``frame`` with observed latencies.

    Per target (``ttft``, ``tpot``) overall and per accelerator: ``mape_p50`` (mean |p50 − y|
    / y), ``mdape_p50`` (its median), pinball losses of p50 and p95 (s) and ``coverage_p95``
    (share of rows with y ≤ p95; 0.95 is perfect). Rows without an observation are skipped.
    """
    predicted = model.predict(frame)
    accelerator = frame["accelerator"].astype(str).to_numpy()
    out: dict[str, Any] = {}
    for target in TARGETS:
        observed = _observed(frame, target)
        ok = _valid(observed)
        if not ok.any():
            continue
        p50 = predicted[f"{target}_p50"].to_numpy()
        p95 = predicted[f"{target}_p95"].to_numpy()
        scores: dict[str, Any] = _scores(observed[ok], p50[ok], p95[ok])
        scores["by_accelerator"] = {
            str(a): _scores(observed[rows], p50[rows], p95[rows])
            for a in np.unique(accelerator[ok])
            for rows in [ok & (accelerator == a)]
        }
        out[target] = scores
    return out
