"""Retraining without a person in the loop: train a candidate on the latest window of
telemetry, score it and the champion on the same later held-out rows, promote only if it is
at least as good (:func:`training.promote.promote`), and say what happened.

``placement retrain`` runs it once; the service can run it on a schedule (every N hours or N
new records). Both runs land in MLflow; the champion alias moves only on a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from placement.errors import PlacementError
from training.promote import PromotionDecision, promote
from training.tracking import DEFAULT_EXPERIMENT, LATENCY_MODEL
from training.train import TrainResult, train

#: The window retraining reads by default: the last day of telemetry.
DEFAULT_WINDOW_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class RetrainResult:
    """The candidate's training run and the promotion decision about it."""

    trained: TrainResult
    decision: PromotionDecision


def retrain(
    telemetry_dir: Path | str,
    *,
    window_s: float | None = DEFAULT_WINDOW_S,
    experiment: str = DEFAULT_EXPERIMENT,
    train_fraction: float = 0.7,
    progress: Callable[[str], None] | None = None,
) -> RetrainResult:
    """Train on the last ``window_s`` seconds of ``telemetry_dir`` (its first
    ``train_fraction`` by arrival), then promote the candidate if it is at least as good as
    the champion on the rest."""
    say = progress or (lambda _message: None)
    trained = train(
        telemetry_dir,
        experiment=experiment,
        train_fraction=train_fraction,
        window_s=window_s,
        progress=say,
    )
    if trained.latency_version is None:
        raise PlacementError(
            f"run {trained.run_id} registered no {LATENCY_MODEL} version: nothing to promote"
        )
    say(f"candidate version {trained.latency_version}: scoring it against the champion")
    decision = promote(trained.latency_version, telemetry_dir=telemetry_dir)
    return RetrainResult(trained=trained, decision=decision)
