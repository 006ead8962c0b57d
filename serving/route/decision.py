"""Building :class:`~serving.route.types.Decision` values on the hot path.

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__`` and parses
keyword arguments; building one that way costs more than the rest of a plan lookup.
:func:`make_decision` takes the contract's fields positionally, in declaration order, and writes
the slots directly through their descriptors (:mod:`serving.route.slot_builder`: same object,
same equality, no frozen check skipped after construction).
"""

from __future__ import annotations

from collections.abc import Callable

from serving.route.slot_builder import slot_builder
from serving.route.types import Decision

# replica_id, address, reason, plan_version, predicted_ttft_s, fallbacks, cached_tokens,
# slot_wait_s, slot_handovers
make_decision: Callable[
    [str, str, str, int | None, float, tuple[str, ...], int, float, int], Decision
] = slot_builder(Decision)
