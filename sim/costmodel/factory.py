"""Pick the cost model of a replica kind: its kernel times, under its measured serving stack.

Kernel times: the accelerator's measured operator tables when they cover the model, else the
datasheet roofline with utilization learned on the profiled accelerators
(:class:`~sim.costmodel.roofline.RooflineCostModel`, whose ``reason`` says what was missing).
Host side: when the catalogue attaches end-to-end measurements to the accelerator, the serving
stack calibrated on them (:mod:`sim.costmodel.measured`; applied to the tables,
``calibrated_on`` says to what), else the vLLM framework overhead.

``cost_model_for`` is cached per (accelerator, model, tp, stack): a fleet of a thousand
identical replicas shares one tabulated model.
"""

from __future__ import annotations

from functools import lru_cache

from placement.domain.accelerators import Accelerator
from placement.domain.fleet import ReplicaSpec
from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.base import IterationCostModel
from sim.costmodel.kernels import kernel_cost_model
from sim.costmodel.measured import Calibration, calibration_for
from sim.costmodel.roofline import RooflineCostModel


@lru_cache(maxsize=256)
def cost_model_for(
    accelerator: Accelerator, model: ModelArchitecture, tp: int, stack: str | None = None
) -> IterationCostModel:
    """The iteration-time model of ``model`` on ``tp`` GPUs of ``accelerator`` (see the module
    docstring); ``stack`` names a measured serving stack (default: vLLM if measured, else the
    first measured)."""
    try:
        calibration = calibration_for(accelerator, stack)
    except InputError as exc:  # measurements that cannot be read: say so, run uncalibrated
        kernels = kernel_cost_model(accelerator, model, tp)
        if isinstance(kernels, RooflineCostModel):
            kernels.reason += f"; end-to-end measurements unusable ({exc})"
        return kernels
    if calibration is None:
        return kernel_cost_model(accelerator, model, tp)
    return kernel_cost_model(
        accelerator,
        model,
        tp,
        stack=calibration.stack,
        calibrated_on=calibration_label(calibration),
    )


def calibration_label(calibration: Calibration) -> str:
    """``"<stack> stack of <owner>: <what it was fitted on>"``; the owner is the accelerator
    for its own end-to-end fit, ``shared`` for the stack every profiled accelerator shares."""
    owner = calibration.accelerator
    return f"{calibration.framework} stack of {owner}: {calibration.fitted_on}"


def own_calibration(calibrated_on: str, accelerator: Accelerator) -> bool:
    """Whether ``calibrated_on`` (see :func:`calibration_label`) is the accelerator's own."""
    return f" stack of {accelerator.kind}:" in calibrated_on


def cost_model_for_replica(spec: ReplicaSpec) -> IterationCostModel:
    """The (shared, cached) cost model of one replica's kind."""
    return cost_model_for(spec.accelerator, spec.model, spec.tp)
