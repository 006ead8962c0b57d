"""``random``: a uniformly random eligible replica, from a seeded RNG."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement.routing.base import Pipeline
from placement.routing.filters import HealthFilter, ModelFilter
from placement.routing.pickers import RandomPicker

if TYPE_CHECKING:
    from placement.routing.policies.context import PolicyContext


def build(ctx: PolicyContext) -> Pipeline:
    """The random policy, reproducible through ``ctx.seed``."""
    return Pipeline(
        "random", filters=[ModelFilter(), HealthFilter()], picker=RandomPicker(ctx.seed)
    )
