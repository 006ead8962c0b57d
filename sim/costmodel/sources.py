"""Where an accelerator's timings come from, and how far off that source is expected to be.

Three sources, best first:

- ``profiles``: measured operator tables of the accelerator cover the model's shapes
  (:class:`~sim.costmodel.profiled.ProfiledCostModel`);
- ``end-to-end fit``: no tables, but end-to-end measurements of the accelerator: the
  datasheet-transferred roofline, calibrated on a handful of them;
- ``roofline only``: the datasheet-transferred roofline alone
  (:class:`~sim.costmodel.roofline.RooflineCostModel`).

The expected error of each source is what ``placement bench cost-model`` measured on held-out
rows and wrote to ``data/catalogue/fidelity.yaml`` (``--update-catalogue``);
:func:`expected_errors` reads it (no figure when the file is missing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from placement.domain.accelerators import Accelerator
from placement.domain.catalogue_files import shipped_folder
from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.factory import cost_model_for, own_calibration
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import find_profile

SourceKind = Literal["profiles", "end-to-end fit", "roofline only"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("profiles", "end-to-end fit", "roofline only")
FIDELITY_FILE = "fidelity.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingSource:
    """One accelerator's (or replica kind's) timing source and its expected median error."""

    accelerator: str
    source: SourceKind
    expected_error: float | None  # median APE of this source on held-out measurements
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "source": self.source,
            "expected_error": self.expected_error,
            "detail": self.detail,
        }


def fidelity_path() -> Path:
    return shipped_folder() / FIDELITY_FILE


@cache
def _read_fidelity(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read ({exc})", source=str(path)) from None
    sources = raw.get("sources") if isinstance(raw, dict) else None
    if not isinstance(sources, dict):
        raise InputError("no 'sources' mapping", source=str(path), field="sources")
    return {str(k): dict(v) for k, v in sources.items() if isinstance(v, dict)}


def expected_errors() -> dict[str, dict[str, Any]]:
    """Per source kind, what the bench measured (``median_ape``, ``what``); may be empty."""
    return _read_fidelity(fidelity_path())


def _expected(kind: SourceKind) -> float | None:
    value = expected_errors().get(kind, {}).get("median_ape")
    return None if value is None else float(value)


def source_of(
    accelerator: Accelerator, *, has_profile: bool, calibrated: bool, reason: str = ""
) -> TimingSource:
    """The source of an accelerator given whether its tables were found (and cover the model)
    and whether the fallback is calibrated on its end-to-end measurements."""
    if has_profile:
        kind: SourceKind = "profiles"
        detail = f"operator profile '{accelerator.profile}'"
    elif calibrated:
        kind = "end-to-end fit"
        files = ", ".join(sorted({Path(m.file).name for m in accelerator.measurements}))
        detail = f"datasheet roofline calibrated on end-to-end measurements ({files})"
    else:
        kind = "roofline only"
        detail = "datasheet roofline with efficiencies learned on the profiled accelerators"
    if reason:
        detail += f"; {reason}"
    return TimingSource(
        accelerator=accelerator.kind, source=kind, expected_error=_expected(kind), detail=detail
    )


def accelerator_source(accelerator: Accelerator) -> TimingSource:
    """Source of an accelerator's timings for a model its tables cover (if it has tables)."""
    found = accelerator.profile is not None and find_profile(accelerator.profile) is not None
    reason = ""
    if accelerator.profile is not None and not found:
        reason = f"profile '{accelerator.profile}' not found"
    calibrated = bool(accelerator.measurements) and not found
    return source_of(accelerator, has_profile=found, calibrated=calibrated, reason=reason)


def replica_source(accelerator: Accelerator, model: ModelArchitecture, tp: int) -> TimingSource:
    """Source of one replica kind's timings: what :func:`cost_model_for` actually uses."""
    cm = cost_model_for(accelerator, model, tp)
    calibrated_on = str(getattr(cm, "calibrated_on", ""))
    note = f"stack calibrated on {calibrated_on}" if calibrated_on else ""
    if isinstance(cm, ProfiledCostModel):
        return source_of(accelerator, has_profile=True, calibrated=False, reason=note)
    reason = str(getattr(cm, "reason", ""))
    predicted = tuple(getattr(cm, "predicted", ()))
    if predicted and predicted != ("every operator",):
        reason += "; from the datasheet: " + ", ".join(predicted) + " (the rest measured)"
    if note:
        reason += f"; {note}"
    calibrated = own_calibration(calibrated_on, accelerator)
    return source_of(accelerator, has_profile=False, calibrated=calibrated, reason=reason)


def replica_sources(
    kinds: Iterable[tuple[Accelerator, ModelArchitecture, int]],
) -> list[tuple[str, int, TimingSource]]:
    """(model name, tp, source) of each distinct replica kind, sorted by accelerator."""
    seen: dict[tuple[str, str, int], tuple[str, int, TimingSource]] = {}
    for accelerator, model, tp in kinds:
        key = (accelerator.kind, model.name, tp)
        if key not in seen:
            seen[key] = (model.name, tp, replica_source(accelerator, model, tp))
    return [seen[k] for k in sorted(seen)]
