"""Building :class:`~serving.route.types.Decision` values on the hot path.

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__`` and parses
keyword arguments; building one that way costs more than the rest of a plan lookup. When the
contract's fields are exactly the nine this module knows, :func:`make_decision` writes the slots
directly through their descriptors (same object, same equality, no frozen check skipped after
construction). If the contract grows a field, it falls back to the ordinary constructor so a
new field always gets its default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from serving.route.types import Decision

_KNOWN = (
    "replica_id",
    "address",
    "reason",
    "plan_version",
    "predicted_ttft_s",
    "fallbacks",
    "cached_tokens",
    "slot_wait_s",
    "slot_handovers",
)


def _slow(
    replica_id: str,
    address: str,
    reason: str,
    plan_version: int | None,
    predicted_ttft_s: float,
    fallbacks: tuple[str, ...],
    cached_tokens: int = 0,
    slot_wait_s: float = 0.0,
    slot_handovers: int = 0,
) -> Decision:
    return Decision(
        replica_id=replica_id,
        address=address,
        reason=reason,
        plan_version=plan_version,
        predicted_ttft_s=predicted_ttft_s,
        fallbacks=fallbacks,
        cached_tokens=cached_tokens,
        slot_wait_s=slot_wait_s,
        slot_handovers=slot_handovers,
    )


def _fast_builder() -> Callable[
    [str, str, str, int | None, float, tuple[str, ...], int, float, int], Decision
]:
    new = object.__new__
    slots = [getattr(Decision, name).__set__ for name in _KNOWN]
    (
        set_id,
        set_address,
        set_reason,
        set_version,
        set_ttft,
        set_fallbacks,
        set_cached,
        set_wait,
        set_handovers,
    ) = slots

    def build(
        replica_id: str,
        address: str,
        reason: str,
        plan_version: int | None,
        predicted_ttft_s: float,
        fallbacks: tuple[str, ...],
        cached_tokens: int = 0,
        slot_wait_s: float = 0.0,
        slot_handovers: int = 0,
    ) -> Decision:
        d: Decision = new(Decision)
        set_id(d, replica_id)
        set_address(d, address)
        set_reason(d, reason)
        set_version(d, plan_version)
        set_ttft(d, predicted_ttft_s)
        set_fallbacks(d, fallbacks)
        set_cached(d, cached_tokens)
        set_wait(d, slot_wait_s)
        set_handovers(d, slot_handovers)
        return d

    return build


make_decision = _fast_builder() if tuple(f.name for f in fields(Decision)) == _KNOWN else _slow
