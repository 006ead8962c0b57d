"""Kernel times of a replica kind: measured operator tables, else the datasheet fallback."""

from __future__ import annotations

from placement.domain.accelerators import Accelerator
from placement.domain.llm import ModelArchitecture
from placement.errors import ProfileUnavailable
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import load_profile
from sim.costmodel.roofline import RooflineCostModel
from sim.costmodel.stack import StackCalibration


def kernel_cost_model(
    accelerator: Accelerator,
    model: ModelArchitecture,
    tp: int,
    *,
    stack: StackCalibration | None = None,
    calibrated_on: str = "",
) -> ProfiledCostModel | RooflineCostModel:
    """Measured tables when they cover every shape the model needs, else the datasheet
    fallback (keeping the measured tables for the operators they do cover) with the reason
    (no profile for the accelerator, no attention rows for the per-GPU head counts, no MoE rows
    for the expert shape, no all-reduce table for ``tp`` GPUs…), both under ``stack`` when
    given. A ``tp`` that does not divide the model's heads raises
    :class:`~placement.errors.InputError`.
    """
    measured = None
    if accelerator.profile is not None:
        try:
            measured = load_profile(accelerator.profile)
            return ProfiledCostModel(
                accelerator, model, tp, stack=stack, calibrated_on=calibrated_on
            )
        except ProfileUnavailable as exc:
            reason = str(exc)
    else:
        reason = f"accelerator '{accelerator.kind}' has no measured operator profile"
    return RooflineCostModel(
        accelerator,
        model,
        tp,
        reason=reason,
        measured=measured,
        stack=stack,
        calibrated_on=calibrated_on,
    )
