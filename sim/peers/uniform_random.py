"""``random``: a uniformly random eligible replica, from a seeded RNG."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.peers.filters import HealthFilter, ModelFilter
from sim.peers.pickers import RandomPicker
from sim.router import Pipeline

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext


def build(ctx: PolicyContext) -> Pipeline:
    """The random policy, reproducible through ``ctx.seed``."""
    return Pipeline(
        "random", filters=[ModelFilter(), HealthFilter()], picker=RandomPicker(ctx.seed)
    )
