"""Building :class:`~serving.route.types.RouteQuery` values on the hot path: every field
positionally, in declaration order, written straight to its slot
(:mod:`serving.route.slot_builder`), not through the frozen dataclass's keyword ``__init__``."""

from __future__ import annotations

from collections.abc import Callable

from serving.route.slot_builder import slot_builder
from serving.route.types import RouteQuery

# tenant, model, request_class, block_hashes, input_tokens, max_output_tokens (then, optional:
# ttft_budget_s, adapter, priority)
make_query: Callable[[str, str, str, tuple[int, ...], int, int], RouteQuery] = slot_builder(
    RouteQuery
)
