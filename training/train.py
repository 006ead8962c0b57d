"""A training run: telemetry store → training frame → time split → fit → held-out metrics →
MLflow (parameters, dataset digest, metrics, plots, the model with its signature) → new
versions of ``placement-latency`` and ``placement-throughput``.

The held-out part is recorded as run tags (``heldout.start``, ``heldout.end`` — first and last
arrival, ISO — ``heldout.rows``, ``heldout.digest`` and ``telemetry.path``) so that promotion can
rebuild exactly those rows and score any two versions on them.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.features import INPUT_COLUMNS
from models.predictor import LatencyModel, LatencyPredictor, RooflineBaseline, latency_metrics
from models.quantile import QuantileConfig
from placement.errors import InputError
from training.dataset import build_training_frame
from training.measurements import load_measurements
from training.pyfunc import MODEL_CODE, OUTPUTS, PREDICTOR_ARTIFACT, predict_output
from training.split import split_by_time
from training.telemetry.store import read_requests, read_samples
from training.tracking import (
    DEFAULT_EXPERIMENT,
    LATENCY_MODEL,
    THROUGHPUT_MODEL,
    connect,
    ensure_experiment,
)

Progress = Callable[[str], None]
OBSERVED_THROUGHPUT = "generation_tokens_per_s"
LOAD_DECILES = 10
# the packages the pyfunc needs besides this project (given, so MLflow does not infer them
# by importing the model in a subprocess, which is slow and pulls the whole environment)
PYFUNC_PACKAGES = ("mlflow", "lightgbm", "numpy", "pandas", "pyarrow", "scipy")


@dataclass(frozen=True, slots=True)
class TrainResult:
    """A finished run: its id, the registered versions (``None`` if not registered) and the
    flat held-out metrics it logged."""

    run_id: str
    latency_version: str | None
    throughput_version: str | None
    metrics: dict[str, float]


# ---- data ---------------------------------------------------------------------------------


def load_frame(telemetry_dir: Path | str) -> pd.DataFrame:
    """The training frame of a whole telemetry store; InputError if it holds no served rows."""
    requests = read_requests(telemetry_dir)
    samples = read_samples(telemetry_dir)
    frame = build_training_frame(requests, samples)
    if frame.empty:
        raise InputError(
            f"no served request with a prior replica sample ({len(requests)} requests, "
            f"{len(samples)} samples)",
            source=str(telemetry_dir),
            expected="telemetry from `placement telemetry export`",
        )
    return frame


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 of the frame's content (column names and every value, row order as given)."""
    digest = hashlib.sha256(",".join(map(str, frame.columns)).encode())
    hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)
    digest.update(hashed.tobytes())
    return digest.hexdigest()


def rows_between(frame: pd.DataFrame, first: str, last: str) -> pd.DataFrame:
    """Rows arriving in ``[first, last]`` (ISO times, as the ``heldout.*`` tags hold them)."""
    arrival = frame["arrival_time"]
    return frame[(arrival >= pd.Timestamp(first)) & (arrival <= pd.Timestamp(last))]


def latest_window(frame: pd.DataFrame, window_s: float | None) -> pd.DataFrame:
    """The rows that arrived in the last ``window_s`` seconds of the frame (all when None)."""
    if window_s is None:
        return frame
    if not window_s > 0:
        raise InputError(f"got {window_s}", field="window_s", expected="seconds > 0")
    arrival = frame["arrival_time"]
    recent: pd.DataFrame = frame[arrival >= arrival.max() - pd.Timedelta(seconds=window_s)]
    return recent


def _time_range(frame: pd.DataFrame) -> tuple[str, str]:
    return frame["arrival_time"].min().isoformat(), frame["arrival_time"].max().isoformat()


# ---- metrics ------------------------------------------------------------------------------


def throughput_mape(predictor: LatencyPredictor, frame: pd.DataFrame) -> float:
    """Mean APE of predicted vs observed generation tokens/s over rows whose replica was
    generating (observed rate > 0); NaN if there are none."""
    observed = frame[OBSERVED_THROUGHPUT].to_numpy(dtype=np.float64)
    busy = observed > 0
    if not busy.any():
        return float("nan")
    predicted = predictor.predict_throughput(frame)
    return float(np.mean(np.abs(predicted[busy] - observed[busy]) / observed[busy]))


def flat_metrics(scores: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """``latency_metrics`` output as MLflow metric names: ``ttft.mape_p50``,
    ``ttft.H100-SXM.coverage_p95``, … (``prefix`` prepended)."""
    out: dict[str, float] = {}
    for target, values in scores.items():
        for name, value in values.items():
            if name == "by_accelerator":
                for accelerator, per in value.items():
                    for metric, v in per.items():
                        out[f"{prefix}{target}.{accelerator}.{metric}"] = float(v)
            else:
                out[f"{prefix}{target}.{name}"] = float(value)
    return out


def evaluate(model: LatencyModel, frame: pd.DataFrame, prefix: str = "") -> dict[str, float]:
    """Flat held-out metrics of a latency model (and throughput MAPE for a predictor)."""
    out = flat_metrics(latency_metrics(model, frame), prefix)
    if isinstance(model, LatencyPredictor):
        out[f"{prefix}throughput.mape"] = throughput_mape(model, frame)
    return out


# ---- plots --------------------------------------------------------------------------------


def plot_predicted_vs_actual(frame: pd.DataFrame, predicted: pd.DataFrame) -> Any:
    """Log-log scatter of p50 prediction vs observation for TTFT and TPOT, per accelerator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, target in zip(axes, ("ttft", "tpot"), strict=True):
        observed = frame[f"{target}_s"].to_numpy(dtype=np.float64, na_value=np.nan)
        p50 = predicted[f"{target}_p50"].to_numpy()
        ok = np.isfinite(observed) & (observed > 0)
        for accelerator in sorted(frame["accelerator"].astype(str).unique()):
            rows = ok & (frame["accelerator"].astype(str).to_numpy() == accelerator)
            ax.scatter(observed[rows], p50[rows], s=6, alpha=0.5, label=accelerator)
        if ok.any():
            lo, hi = float(observed[ok].min()), float(observed[ok].max())
            ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
        ax.set(xscale="log", yscale="log", xlabel="observed (s)", ylabel="predicted p50 (s)")
        ax.set_title(f"{target.upper()} held-out")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_error_by_load(frame: pd.DataFrame, predicted: pd.DataFrame) -> Any:
    """Mean |p50 − y| / y by decile of outstanding requests (running + waiting) at arrival."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outstanding = frame["num_requests_running"] + frame["num_requests_waiting"]
    ranks = outstanding.rank(method="first")
    decile = pd.qcut(ranks, min(LOAD_DECILES, len(frame)), labels=False)
    fig, ax = plt.subplots(figsize=(7, 4))
    for target in ("ttft", "tpot"):
        observed = frame[f"{target}_s"].astype("float64")
        ape = (predicted[f"{target}_p50"] - observed).abs() / observed
        by_decile = ape.groupby(decile).mean()
        ax.plot(by_decile.index + 1, by_decile.to_numpy(), marker="o", label=target.upper())
    ax.set(xlabel="load decile (outstanding requests at arrival)", ylabel="mean APE of p50")
    ax.set_title("Held-out error by load")
    ax.legend()
    fig.tight_layout()
    return fig


# ---- the run ------------------------------------------------------------------------------


def _signature_example(frame: pd.DataFrame) -> pd.DataFrame:
    """A few input rows in plain dtypes (strings as objects, counts as int64)."""
    example = frame[list(INPUT_COLUMNS)].head(5).reset_index(drop=True)
    for column in example.columns:
        if pd.api.types.is_string_dtype(example[column]):
            example[column] = example[column].astype(object)
        elif pd.api.types.is_integer_dtype(example[column]):
            example[column] = example[column].astype("int64")
    return example


def _schema(frame: pd.DataFrame) -> Any:
    """The MLflow column schema of a frame: string, long (counts) or double columns.

    Written out rather than inferred: inference warns that integer columns cannot hold missing
    values, which ours never do (a request always has token counts)."""
    from mlflow.types import ColSpec, Schema

    def kind(column: str) -> str:
        if pd.api.types.is_integer_dtype(frame[column]):
            return "long"
        if pd.api.types.is_float_dtype(frame[column]):
            return "double"
        return "string"

    return Schema([ColSpec(kind(c), c) for c in frame.columns])


def _pip_requirements() -> list[str]:
    return [f"{name}=={metadata.version(name)}" for name in PYFUNC_PACKAGES]


def _log_models(predictor: LatencyPredictor, frame: pd.DataFrame) -> tuple[str, str]:
    """Log the predictor twice (latency and throughput outputs) and register both; returns
    the two new version numbers."""
    import mlflow
    from mlflow.models import ModelSignature

    example = _signature_example(frame)
    versions: list[str] = []
    with tempfile.TemporaryDirectory(prefix="placement-predictor-") as tmp:
        directory = predictor.save(Path(tmp) / "predictor")
        for output, registered in zip(OUTPUTS, (LATENCY_MODEL, THROUGHPUT_MODEL), strict=True):
            signature = ModelSignature(
                inputs=_schema(example),
                outputs=_schema(predict_output(predictor, example, output)),
            )
            info = mlflow.pyfunc.log_model(
                name=output,
                # logged as code, not pickled (MLflow warns on every pickled python_model)
                python_model=MODEL_CODE[output],
                artifacts={PREDICTOR_ARTIFACT: str(directory)},
                signature=signature,
                input_example=example,
                pip_requirements=_pip_requirements(),
                registered_model_name=registered,
            )
            versions.append(str(info.registered_model_version))
    return versions[0], versions[1]


def train(
    telemetry_dir: Path | str,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
    train_fraction: float = 0.7,
    config: QuantileConfig | None = None,
    measurements: str | None = None,
    progress: Progress | None = None,
    window_s: float | None = None,
) -> TrainResult:
    """Train on the first ``train_fraction`` of the store's requests (by arrival), evaluate on
    the rest, log everything to MLflow (see the module doc) and register new versions.
    ``measurements`` (``splitwise`` or a CSV in its columns) adds measured rows to training
    (:func:`training.measurements.load_measurements`)."""
    import mlflow

    say = progress or (lambda _message: None)
    # a bad measurements file is refused before the (longer) read of the telemetry
    measured = load_measurements(measurements) if measurements else None
    say(f"reading telemetry from {telemetry_dir}")
    frame = latest_window(load_frame(telemetry_dir), window_s)
    split = split_by_time(frame, train_fraction)
    client = connect()
    experiment_id = ensure_experiment(client, experiment)
    predictor_config = config or QuantileConfig()
    with mlflow.start_run(experiment_id=experiment_id) as run:
        train_range, heldout_range = _time_range(split.train), _time_range(split.heldout)
        mlflow.log_params(
            {
                "train_fraction": train_fraction,
                "window_s": window_s if window_s is not None else "all",
                "train_rows": len(split.train),
                "heldout_rows": len(split.heldout),
                "accelerators": ",".join(sorted(frame["accelerator"].astype(str).unique())),
                "measurements": measurements or "none",
                "measured_rows": 0 if measured is None else len(measured),
                **{f"config.{k}": v for k, v in asdict(predictor_config).items()},
            }
        )
        mlflow.set_tags(
            {
                "telemetry.path": str(Path(telemetry_dir).resolve()),
                "dataset.digest": frame_digest(frame),
                "dataset.rows": str(len(frame)),
                "dataset.start": _time_range(frame)[0],
                "dataset.end": _time_range(frame)[1],
                "train.start": train_range[0],
                "train.end": train_range[1],
                "heldout.start": heldout_range[0],
                "heldout.end": heldout_range[1],
                "heldout.rows": str(len(split.heldout)),
                "heldout.digest": frame_digest(split.heldout),
            }
        )
        say(f"fitting on {len(split.train)} rows (before {split.cut.isoformat()})")
        predictor = LatencyPredictor(predictor_config).fit(split.train, measurements=measured)
        say(f"evaluating on {len(split.heldout)} held-out rows")
        metrics = evaluate(predictor, split.heldout)
        baseline = RooflineBaseline.calibrated(split.train)
        metrics |= evaluate(baseline, split.heldout, prefix="baseline.")
        mlflow.log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
        predicted = predictor.predict(split.heldout)
        for fig, file in (
            (plot_predicted_vs_actual(split.heldout, predicted), "predicted_vs_actual.png"),
            (plot_error_by_load(split.heldout, predicted), "error_by_load.png"),
        ):
            mlflow.log_figure(fig, f"plots/{file}")
            _close(fig)
        say("logging and registering the model")
        latency_version, throughput_version = _log_models(predictor, split.heldout)
    return TrainResult(
        run_id=str(run.info.run_id),
        latency_version=latency_version,
        throughput_version=throughput_version,
        metrics=metrics,
    )


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
