"""Pick the cost model of a replica kind: measured tables when they cover it, else the roofline.

``cost_model_for`` is cached per (accelerator, model, tp): a fleet of a thousand identical replicas
shares one tabulated model.
"""

from __future__ import annotations

from functools import lru_cache

from placement.domain.accelerators import Accelerator
from placement.domain.fleet import ReplicaSpec
from placement.domain.llm import ModelArchitecture
from placement.errors import ProfileUnavailable
from sim.costmodel.base import IterationCostModel
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.roofline import RooflineCostModel


@lru_cache(maxsize=256)
def cost_model_for(
    accelerator: Accelerator, model: ModelArchitecture, tp: int
) -> IterationCostModel:
    """The iteration-time model of ``model`` on ``tp`` GPUs of ``accelerator``.

    A :class:`ProfiledCostModel` when the accelerator has measured tables that cover every shape
    the model needs; otherwise a :class:`RooflineCostModel` whose ``reason`` says what was
    missing (no profile for the accelerator, no attention rows for the per-GPU head counts, no
    MoE rows for the expert shape, no all-reduce table for ``tp`` GPUs…). A ``tp`` that does not
    divide the model's heads raises :class:`~placement.errors.InputError`.
    """
    if accelerator.profile is None:
        reason = f"accelerator '{accelerator.kind}' has no measured operator profile"
        return RooflineCostModel(accelerator, model, tp, reason=reason)
    try:
        return ProfiledCostModel(accelerator, model, tp)
    except ProfileUnavailable as exc:
        return RooflineCostModel(accelerator, model, tp, reason=str(exc))


def cost_model_for_replica(spec: ReplicaSpec) -> IterationCostModel:
    """The (shared, cached) cost model of one replica's kind."""
    return cost_model_for(spec.accelerator, spec.model, spec.tp)
