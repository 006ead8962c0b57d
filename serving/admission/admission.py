"""Admission before routing: priority classes, bounded in-flight budgets, shedding order.

A pure object (no HTTP, no clock) so the simulator can run the very same admission.

The fleet has an in-flight budget (requests dispatched and not yet completed). Below
``soft_fraction`` of it every request is admitted within its class budget. Between the soft
mark and the budget, sheddable requests are refused progressively: the lowest priority class
first and, within a class, the tenants furthest over their credit first (their position among
active tenants' Virtual Token Counters). At the budget every sheddable request is refused.

A non-sheddable request is never refused while a sheddable one is in flight: it borrows the
capacity the sheddable work will free as it drains (new sheddable work is refused meanwhile).
With no sheddable work in flight, it is refused at the fleet budget or its class budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from placement.domain.requests import DEFAULT_CLASSES, RequestClass
from placement.errors import InputError
from serving.admission.vtc import VirtualTokenCounter

DEFAULT_SOFT_FRACTION = 0.8
DEFAULT_RETRY_AFTER_S = 1.0
DEFAULT_CLASS_BUDGET_FRACTION = 1.0  # of the fleet budget


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassBudget:
    """A request class as admission sees it. ``priority`` 0 is the highest."""

    name: str
    priority: int
    sheddable: bool
    max_in_flight: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """Admitted, or refused with a reason and how long to wait before retrying."""

    admitted: bool
    reason: str = "admitted"
    retry_after_s: int = 0


ADMITTED = Verdict(True)


def class_budgets(
    classes: Iterable[RequestClass] = DEFAULT_CLASSES.values(),
    *,
    fleet_in_flight: int,
    fraction: float = DEFAULT_CLASS_BUDGET_FRACTION,
) -> dict[str, ClassBudget]:
    """One budget per request class, each ``fraction`` of the fleet's."""
    return {
        c.name: ClassBudget(
            name=c.name,
            priority=c.priority,
            sheddable=c.sheddable,
            max_in_flight=max(1, int(fleet_in_flight * fraction)),
        )
        for c in classes
    }


class AdmissionController:
    """Counts requests in flight per class and tenant and decides who may enter."""

    def __init__(
        self,
        *,
        classes: Mapping[str, ClassBudget],
        fleet_in_flight: int,
        vtc: VirtualTokenCounter | None = None,
        soft_fraction: float = DEFAULT_SOFT_FRACTION,
        retry_after_s: float = DEFAULT_RETRY_AFTER_S,
    ) -> None:
        if not classes:
            raise InputError("no request classes", field="classes")
        if not 0 < soft_fraction <= 1:
            raise InputError(f"{soft_fraction}", field="soft_fraction", expected="in (0, 1]")
        self.classes = dict(classes)
        self.fleet_in_flight = max(1, fleet_in_flight)
        self.vtc = vtc if vtc is not None else VirtualTokenCounter()
        self.soft_fraction = soft_fraction
        self.retry_after_s = retry_after_s
        self.in_flight_by_class: dict[str, int] = dict.fromkeys(self.classes, 0)
        self.in_flight = 0
        self.sheddable_in_flight = 0
        # level of each sheddable class: 0 for the highest priority, n-1 for the lowest
        shed = sorted((c for c in self.classes.values() if c.sheddable), key=lambda c: c.priority)
        self._shed_level = {c.name: i for i, c in enumerate(shed)}

    def class_of(self, name: str) -> ClassBudget:
        budget = self.classes.get(name)
        if budget is None:
            raise InputError(
                f"unknown request class '{name}'",
                field="request_class",
                expected="one of " + ", ".join(sorted(self.classes)),
            )
        return budget

    def set_fleet_capacity(self, fleet_in_flight: int) -> None:
        """The fleet grew or shrank: rescale the fleet budget (class budgets keep their share)."""
        new = max(1, fleet_in_flight)
        scale = new / self.fleet_in_flight
        self.classes = {
            n: ClassBudget(
                name=c.name,
                priority=c.priority,
                sheddable=c.sheddable,
                max_in_flight=max(1, round(c.max_in_flight * scale)),
            )
            for n, c in self.classes.items()
        }
        self.fleet_in_flight = new

    def check(self, tenant: str, request_class: str) -> Verdict:
        """Would a request be admitted now? (Counts nothing.)"""
        budget = self.class_of(request_class)
        if budget.sheddable:
            return self._check_sheddable(tenant, budget)
        if self.sheddable_in_flight > 0:
            return ADMITTED
        if self.in_flight >= self.fleet_in_flight:
            return self._refuse("saturated", budget)
        if self.in_flight_by_class[budget.name] >= budget.max_in_flight:
            return self._refuse("class_full", budget)
        return ADMITTED

    def _check_sheddable(self, tenant: str, budget: ClassBudget) -> Verdict:
        if self.in_flight_by_class[budget.name] >= budget.max_in_flight:
            return self._refuse("class_full", budget)
        utilisation = self.in_flight / self.fleet_in_flight
        if utilisation < self.soft_fraction:
            return ADMITTED
        if utilisation >= 1.0:
            return self._refuse("saturated", budget)
        pressure = (utilisation - self.soft_fraction) / (1.0 - self.soft_fraction)
        levels = len(self._shed_level)
        severity = (self._shed_level[budget.name] + self.vtc.over_credit(tenant)) / levels
        if severity >= 1.0 - pressure:
            return self._refuse("shed", budget)
        return ADMITTED

    def _refuse(self, reason: str, budget: ClassBudget) -> Verdict:
        # lower priorities wait longer, so the higher ones come back first
        level = self._shed_level.get(budget.name, 0)
        return Verdict(False, reason, math.ceil(self.retry_after_s * (1 + level)))

    def admit(self, tenant: str, request_class: str, input_tokens: int) -> Verdict:
        """Decide and, when admitted, count the request in flight and charge its prompt."""
        verdict = self.check(tenant, request_class)
        if verdict.admitted:
            self._count(request_class, +1)
            self.vtc.start(tenant, input_tokens)
        return verdict

    def release(self, tenant: str, request_class: str, output_tokens: int) -> None:
        """An admitted request completed (or its lease expired) after ``output_tokens``."""
        self._count(request_class, -1)
        self.vtc.finish(tenant, output_tokens)

    def _count(self, request_class: str, delta: int) -> None:
        budget = self.classes[request_class]
        self.in_flight_by_class[request_class] = max(
            0, self.in_flight_by_class[request_class] + delta
        )
        self.in_flight = max(0, self.in_flight + delta)
        if budget.sheddable:
            self.sheddable_in_flight = max(0, self.sheddable_in_flight + delta)
