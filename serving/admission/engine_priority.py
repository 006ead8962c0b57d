"""The engine priority a request is sent with: vLLM's ``priority`` (lower served first).

A vLLM replica started with ``--scheduling-policy priority`` serves its waiting requests in the
order of the ``priority`` each carries (then by arrival) and, when its KV blocks run out,
preempts the running request of the worst priority. The router sets it per request:

- by **class** (:data:`CLASS`): the request class's own ``priority`` (interactive 0 before
  batch 1), so a tight-TTFT prompt does not wait inside the engine behind a batch one;
- by class and **credit** standing (:data:`CREDIT`): within a class, a request of a tenant owed
  credit (its Virtual Token Counter in the lower half of the active tenants',
  :meth:`~serving.admission.vtc.VirtualTokenCounter.over_credit` at most :data:`OWED_AT`) goes
  ahead of one whose tenant is over its share: priority ``2 × class + (0 owed, 1 not)``.

A pure object: the service and the simulator's ``placement`` policy set priorities with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from placement.domain.requests import RequestClass
from placement.errors import InputError

CLASS = "class"
CREDIT = "credit"
MODES = (CLASS, CREDIT)
# a tenant whose counter stands at most this far up the active tenants' (0 lowest, 1 highest)
# is owed credit: its requests go ahead within their class
OWED_AT = 0.5


class EnginePriority:
    """Priorities by ``mode`` from ``classes`` and, for :data:`CREDIT`, each tenant's
    ``standing`` (0 most owed … 1 furthest over its share)."""

    def __init__(
        self,
        classes: Mapping[str, RequestClass],
        *,
        mode: str = CLASS,
        standing: Callable[[str], float] | None = None,
    ) -> None:
        if mode not in MODES:
            raise InputError(f"{mode!r}", field="engine_priority", expected=" or ".join(MODES))
        if mode == CREDIT and standing is None:
            raise InputError(
                "engine priority by credit needs the tenants' credit standing (the SLO gate)",
                field="engine_priority",
                expected=CLASS,
            )
        self.mode = mode
        self._class_priority = {name: c.priority for name, c in classes.items()}
        self._standing = standing

    def of(self, tenant: str, request_class: str) -> int:
        """The priority a request of ``tenant`` in ``request_class`` is sent with now."""
        base = self._class_priority.get(request_class)
        if base is None:
            raise InputError(
                f"unknown request class '{request_class}'",
                field="request_class",
                expected="one of " + ", ".join(sorted(self._class_priority)),
            )
        if self._standing is None or self.mode == CLASS:
            return base
        return 2 * base + (0 if self._standing(tenant) <= OWED_AT else 1)
