"""Engine cost model: a replica's iteration time, composed from measured operator profiles."""

from sim.costmodel.base import IterationCostModel

__all__ = ["IterationCostModel"]
