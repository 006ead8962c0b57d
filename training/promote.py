"""Promotion: move the ``champion`` alias to a candidate version only if it is at least as good
as the current champion on the same held-out rows; and loading the champion for the planner.

Both versions are scored on the candidate run's held-out part (its ``heldout.start`` /
``heldout.end`` tags), rebuilt from the telemetry store given or the one the run logged. The
rule, per target (TTFT and TPOT):

* accuracy — candidate ``mape_p50`` ≤ champion's × (1 + :data:`MAPE_TOLERANCE`);
* calibration — candidate ``coverage_p95`` inside :data:`COVERAGE_BAND`, or no farther from
  0.95 than the champion's (+ :data:`COVERAGE_SLACK`).

Every failed check is named with both numbers. The throughput version registered by the same
run gets the alias too. The rows are those the candidate never saw; a champion trained on a
later store may have seen them, which only makes the comparison harder for the candidate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.predictor import LatencyPredictor
from placement.errors import InputError, PredictorUnavailable
from placement.plan.capacity_source import model_source
from training.pyfunc import unwrap
from training.tracking import (
    CHAMPION,
    LATENCY_MODEL,
    THROUGHPUT_MODEL,
    connect,
    missing_champion,
)
from training.train import evaluate, frame_digest, load_frame, rows_between

MAPE_TOLERANCE = 0.02
COVERAGE_TARGET = 0.95
COVERAGE_BAND = (0.90, 0.99)
COVERAGE_SLACK = 0.01
TARGETS = ("ttft", "tpot")


@dataclass(frozen=True, slots=True)
class PromotionDecision:
    """Whether the candidate became champion, why, and both versions' held-out metrics
    (``champion`` is empty when there was none)."""

    promoted: bool
    reason: str
    candidate: dict[str, float]
    champion: dict[str, float]
    candidate_version: str
    champion_version: str | None


@dataclass(frozen=True, slots=True)
class Champion:
    """The predictor that holds the ``champion`` alias and its version of ``placement-latency``."""

    predictor: LatencyPredictor
    version: str

    @property
    def source(self) -> str:
        """What a plan made from it records: ``models:/placement-latency/<v> (@champion)``."""
        return model_source(LATENCY_MODEL, self.version, CHAMPION)


def compare(candidate: dict[str, float], champion: dict[str, float]) -> list[str]:
    """The checks the candidate fails against the champion (empty: at least as good)."""
    failures: list[str] = []
    for target in TARGETS:
        mape, cover = f"{target}.mape_p50", f"{target}.coverage_p95"
        limit = champion[mape] * (1 + MAPE_TOLERANCE)
        if not candidate[mape] <= limit:
            failures.append(
                f"{mape} {candidate[mape]:.4f} > champion's {champion[mape]:.4f} "
                f"× {1 + MAPE_TOLERANCE:g}"
            )
        lo, hi = COVERAGE_BAND
        in_band = lo <= candidate[cover] <= hi
        gap, champion_gap = (abs(m[cover] - COVERAGE_TARGET) for m in (candidate, champion))
        if not in_band and gap > champion_gap + COVERAGE_SLACK:
            failures.append(
                f"{cover} {candidate[cover]:.3f} outside [{lo}, {hi}] and farther from "
                f"{COVERAGE_TARGET} than champion's {champion[cover]:.3f}"
            )
    return failures


def _version(client: Any, name: str, version: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version(name, version)
    except MlflowException:
        raise InputError(
            f"no version {version} of {name}",
            field="--candidate",
            expected="a version listed by `placement models list`",
        ) from None


def _champion_version(client: Any) -> Any | None:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(LATENCY_MODEL, CHAMPION)
    except MlflowException:
        return None


def _load_predictor(uri: str) -> LatencyPredictor:
    import mlflow

    return unwrap(mlflow.pyfunc.load_model(uri))


def _heldout(tags: dict[str, str], telemetry_dir: Path | str | None) -> tuple[Any, str]:
    """The candidate run's held-out rows and a note if they differ from those it logged."""
    for key in ("heldout.start", "heldout.end"):
        if key not in tags:
            raise InputError(
                "the candidate's run has no held-out range", field=key, expected="a run of train()"
            )
    store = telemetry_dir if telemetry_dir is not None else tags.get("telemetry.path")
    if store is None:
        raise InputError("no telemetry store", field="--telemetry", expected="a store path")
    frame = rows_between(load_frame(store), tags["heldout.start"], tags["heldout.end"])
    if frame.empty:
        raise InputError(
            f"no rows between {tags['heldout.start']} and {tags['heldout.end']}",
            source=str(store),
            expected="the telemetry the candidate was trained on",
        )
    note = ""
    if frame_digest(frame) != tags.get("heldout.digest"):
        note = (
            f" (note: the {len(frame)} held-out rows rebuilt from {store} differ from the "
            f"{tags.get('heldout.rows', '?')} logged at training; both versions were scored "
            "on the rebuilt rows)"
        )
    return frame, note


def _set_champion(client: Any, run_id: str, latency_version: str) -> None:
    client.set_registered_model_alias(LATENCY_MODEL, CHAMPION, latency_version)
    for version in client.search_model_versions(f"name = '{THROUGHPUT_MODEL}'"):
        if version.run_id == run_id:
            client.set_registered_model_alias(THROUGHPUT_MODEL, CHAMPION, version.version)
            break


def _record(client: Any, run_id: str, decision: PromotionDecision) -> PromotionDecision:
    """Log both versions' held-out scores and the decision to the candidate's run
    (``promotion.candidate.*``, ``promotion.champion.*``; tags ``promotion.*``), so the
    registry shows why the alias moved or did not."""
    import math

    from mlflow.entities import Metric, RunTag

    now = int(time.time() * 1000)
    metrics = [
        Metric(f"promotion.{who}.{key}", value, now, 0)
        for who, scores in (("candidate", decision.candidate), ("champion", decision.champion))
        for key, value in scores.items()
        if math.isfinite(value)
    ]
    tags = [
        RunTag("promotion.result", "promoted" if decision.promoted else "kept the champion"),
        RunTag("promotion.champion_version", decision.champion_version or "none"),
        RunTag("promotion.reason", decision.reason[:5000]),
    ]
    client.log_batch(run_id, metrics=metrics, tags=tags)
    return decision


def promote(
    candidate_version: str | int, *, telemetry_dir: Path | str | None = None
) -> PromotionDecision:
    """Score the candidate and the champion on the candidate's held-out rows; move the
    ``champion`` alias to the candidate if it passes :func:`compare` (or there is none)."""
    client = connect()
    version = str(candidate_version)
    candidate_mv = _version(client, LATENCY_MODEL, version)
    tags = dict(client.get_run(candidate_mv.run_id).data.tags)
    champion_mv = _champion_version(client)
    if champion_mv is not None and str(champion_mv.version) == version:
        return PromotionDecision(
            promoted=False,
            reason=f"version {version} already holds the {CHAMPION} alias",
            candidate={},
            champion={},
            candidate_version=version,
            champion_version=version,
        )
    frame, note = _heldout(tags, telemetry_dir)
    candidate = evaluate(_load_predictor(f"models:/{LATENCY_MODEL}/{version}"), frame)
    run_id = candidate_mv.run_id
    if champion_mv is None:
        _set_champion(client, run_id, version)
        first = PromotionDecision(
            promoted=True,
            reason=f"no {CHAMPION} yet: version {version} becomes {CHAMPION}{note}",
            candidate=candidate,
            champion={},
            candidate_version=version,
            champion_version=None,
        )
        return _record(client, run_id, first)
    champion_version = str(champion_mv.version)
    champion = evaluate(_load_predictor(f"models:/{LATENCY_MODEL}/{champion_version}"), frame)
    failures = compare(candidate, champion)
    if failures:
        reason = (
            f"version {version} is worse than {CHAMPION} version {champion_version} on "
            f"{len(frame)} held-out rows: " + "; ".join(failures) + note
        )
        kept = PromotionDecision(False, reason, candidate, champion, version, champion_version)
        return _record(client, run_id, kept)
    _set_champion(client, run_id, version)
    reason = (
        f"version {version} is at least as good as version {champion_version} on "
        f"{len(frame)} held-out rows (TTFT/TPOT MAPE and p95 coverage): now {CHAMPION}{note}"
    )
    promoted = PromotionDecision(True, reason, candidate, champion, version, champion_version)
    return _record(client, run_id, promoted)


def load_champion() -> Champion:
    """The version of ``placement-latency`` behind ``@champion`` and its predictor, for the
    planner. The version is read first and then loaded by number, so a promotion in between
    cannot pair one version's number with another's predictor.

    Raises PredictorUnavailable when nothing holds the alias or the store cannot be read."""
    missing = missing_champion()
    if missing is not None:
        raise PredictorUnavailable(missing)
    from mlflow.exceptions import MlflowException

    client = connect()
    try:
        champion_mv = _champion_version(client)
        if champion_mv is None:
            raise PredictorUnavailable(
                f"no version of {LATENCY_MODEL} holds the {CHAMPION} alias; train one with "
                "`placement train` and promote it with `placement models promote`"
            )
        version = str(champion_mv.version)
        return Champion(_load_predictor(f"models:/{LATENCY_MODEL}/{version}"), version)
    except (MlflowException, OSError) as exc:
        raise PredictorUnavailable(
            f"cannot load models:/{LATENCY_MODEL}@{CHAMPION}: {exc}"
        ) from None
