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

**Tenants' entitlements.** No tenant can take what others are entitled to. Each tenant is
entitled to ``credit share × budget`` requests in flight (its credit share: the declared
tenants' guaranteed shares), and every tenant, even one never seen before, to at least a floor
(``tenant_floor_fraction`` of the budget). A request of a tenant holding less than its
entitlement is *owed*: no shedding refuses it, only a fleet past its budget by more than that
floor (the slack that lets a newcomer in when others filled the fleet). A request of a tenant
at or past its entitlement *borrows*, and may only borrow what the other credited tenants do
not claim: the unused part of the entitlement of each one active in the last ``active_s``
seconds stays free (``over_credit`` refusals), so a tenant that floods the service, or whose
requests are never reported complete, holds at most the capacity nobody else is owed.

**Several service processes** share one fleet budget: each one counts what it admitted, and
:meth:`AdmissionController.set_elsewhere` tells it what the others hold (their counts as last
shared, :mod:`serving.shared`), which every check adds to its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from placement.domain.requests import DEFAULT_CLASSES, RequestClass
from placement.errors import InputError
from serving.admission.cost import GpuRates
from serving.admission.vtc import VirtualTokenCounter

DEFAULT_SOFT_FRACTION = 0.8
DEFAULT_RETRY_AFTER_S = 1.0
DEFAULT_CLASS_BUDGET_FRACTION = 1.0  # of the fleet budget
# any tenant may hold this share of the fleet budget (8 H100s × 64: 26 requests), and the fleet
# admits a tenant owed it this far past the budget
DEFAULT_TENANT_FLOOR_FRACTION = 0.05
# a credited tenant seen this recently keeps the unused part of its entitlement free
DEFAULT_ACTIVE_S = 60.0


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
        credit_shares: Mapping[str, float] | None = None,
        tenant_floor_fraction: float = DEFAULT_TENANT_FLOOR_FRACTION,
        active_s: float = DEFAULT_ACTIVE_S,
        bound_tenants: bool = True,
    ) -> None:
        if not classes:
            raise InputError("no request classes", field="classes")
        if not 0 < soft_fraction <= 1:
            raise InputError(f"{soft_fraction}", field="soft_fraction", expected="in (0, 1]")
        if not 0 <= tenant_floor_fraction <= 1:
            raise InputError(
                f"{tenant_floor_fraction}", field="tenant_floor_fraction", expected="in [0, 1]"
            )
        self.classes = dict(classes)
        self.fleet_in_flight = max(1, fleet_in_flight)
        self.vtc = vtc if vtc is not None else VirtualTokenCounter()
        self.rates: GpuRates | None = None  # see :meth:`set_rates`
        self.soft_fraction = soft_fraction
        self.retry_after_s = retry_after_s
        self.in_flight_by_class: dict[str, int] = dict.fromkeys(self.classes, 0)
        self.in_flight = 0
        self.sheddable_in_flight = 0
        # tenant → admitted requests in flight (only tenants holding some: names are input)
        self.in_flight_by_tenant: dict[str, int] = {}
        self.tenant_floor_fraction = tenant_floor_fraction
        self.active_s = active_s
        # off: the fleet and class budgets alone (what the service did before entitlements)
        self.bound_tenants = bound_tenants
        self._shares: dict[str, float] = {}
        self._last_seen: dict[str, float] = {}  # credited tenant → its last request
        self._floor = 1
        self._entitled: dict[str, int] = {}  # credited tenant → its entitlement
        self.set_credit_shares(credit_shares or {})
        # held by the other service processes (as last shared): in total, sheddable, per tenant
        self.elsewhere = 0
        self.sheddable_elsewhere = 0
        self.elsewhere_by_tenant: dict[str, int] = {}
        self._retired: dict[str, ClassBudget] = {}  # removed classes with requests in flight
        self._shed_level: dict[str, int] = {}
        self._level_classes()

    def _level_classes(self) -> None:
        # level of each sheddable class: 0 for the highest priority, n-1 for the lowest
        shed = sorted((c for c in self.classes.values() if c.sheddable), key=lambda c: c.priority)
        self._shed_level = {c.name: i for i, c in enumerate(shed)}

    def set_classes(self, classes: Mapping[str, ClassBudget]) -> None:
        """Serve these request classes from now on; requests in flight of a removed class
        still release their place."""
        if not classes:
            raise InputError("no request classes", field="classes")
        for name, budget in self.classes.items():
            if name not in classes and self.in_flight_by_class.get(name, 0) > 0:
                self._retired[name] = budget
        self.classes = dict(classes)
        for name in self.classes:
            self.in_flight_by_class.setdefault(name, 0)
            self._retired.pop(name, None)
        self._level_classes()

    def set_elsewhere(
        self, *, in_flight: int, sheddable: int, by_tenant: Mapping[str, int]
    ) -> None:
        """What the other service processes sharing this fleet hold in flight."""
        self.elsewhere = max(0, in_flight)
        self.sheddable_elsewhere = max(0, sheddable)
        self.elsewhere_by_tenant = {t: n for t, n in by_tenant.items() if n > 0}

    def _held(self, tenant: str) -> int:
        return self.in_flight_by_tenant.get(tenant, 0) + self.elsewhere_by_tenant.get(tenant, 0)

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
        self._entitle()

    def set_credit_shares(self, shares: Mapping[str, float]) -> None:
        """The tenants' credit shares (scaled down to sum to 1 if they sum to more)."""
        positive = {t: float(s) for t, s in shares.items() if s > 0}
        scale = 1.0 / max(1.0, sum(positive.values()))
        self._shares = {t: s * scale for t, s in positive.items()}
        self._last_seen = {t: self._last_seen.get(t, -math.inf) for t in self._shares}
        self._entitle()

    def _entitle(self) -> None:
        # entitlements change with the shares and the fleet, not per request: computed here
        self._floor = max(1, math.ceil(self.tenant_floor_fraction * self.fleet_in_flight))
        self._entitled = {
            t: max(self._floor, int(s * self.fleet_in_flight)) for t, s in self._shares.items()
        }

    def credit_share(self, tenant: str) -> float:
        return self._shares.get(tenant, 0.0)

    def tenant_floor(self) -> int:
        """In-flight requests any tenant may hold, a new one included."""
        return self._floor

    def entitlement(self, tenant: str) -> int:
        """In-flight requests ``tenant`` may hold however busy the others are."""
        return self._entitled.get(tenant, self._floor)

    def claimed_by_others(self, tenant: str, now: float) -> int:
        """The unused entitlement of the credited tenants other than ``tenant`` that are active
        (requests in flight, or a request in the last ``active_s`` seconds)."""
        horizon = now - self.active_s
        held, away = self.in_flight_by_tenant, self.elsewhere_by_tenant
        claimed = 0
        for other, seen in self._last_seen.items():
            if other != tenant and (seen >= horizon or other in held or other in away):
                claimed += max(0, self._entitled[other] - self._held(other))
        return claimed

    def check(self, tenant: str, request_class: str, now: float = 0.0) -> Verdict:
        """Would a request be admitted at ``now``? (Counts nothing.)"""
        budget = self.class_of(request_class)
        in_flight = self.in_flight + self.elsewhere
        if self.bound_tenants:
            if self._held(tenant) < self._entitled.get(tenant, self._floor):
                return self._check_owed(budget)
            claimed = self.claimed_by_others(tenant, now)
            if claimed and in_flight + 1 + claimed > self.fleet_in_flight:
                return self._refuse("over_credit", budget)
        if budget.sheddable:
            return self._check_sheddable(tenant, budget)
        if self.sheddable_in_flight + self.sheddable_elsewhere > 0:
            return ADMITTED
        if in_flight >= self.fleet_in_flight:
            return self._refuse("saturated", budget)
        if self.in_flight_by_class[budget.name] >= budget.max_in_flight:
            return self._refuse("class_full", budget)
        return ADMITTED

    def _check_sheddable(self, tenant: str, budget: ClassBudget) -> Verdict:
        if self.in_flight_by_class[budget.name] >= budget.max_in_flight:
            return self._refuse("class_full", budget)
        utilisation = (self.in_flight + self.elsewhere) / self.fleet_in_flight
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

    def _check_owed(self, budget: ClassBudget) -> Verdict:
        # within its entitlement: borrowers left room for it, or it is a newcomer let in past
        # a fleet others filled, by at most the floor
        if self.in_flight + self.elsewhere >= self.fleet_in_flight + self._floor:
            return self._refuse("saturated", budget)
        return ADMITTED

    def _refuse(self, reason: str, budget: ClassBudget) -> Verdict:
        # lower priorities wait longer, so the higher ones come back first
        level = self._shed_level.get(budget.name, 0)
        return Verdict(False, reason, math.ceil(self.retry_after_s * (1 + level)))

    def set_rates(self, rates: GpuRates | None) -> None:
        """Charge credits in GPU-seconds at ``rates`` (the fleet's average replica: admission
        runs before the route path picks one; :mod:`serving.admission.cost`); None: weighted
        tokens."""
        self.rates = rates

    def admit(
        self, tenant: str, request_class: str, input_tokens: int, now: float = 0.0
    ) -> Verdict:
        """Decide and, when admitted, count the request in flight and charge its prompt.
        A credited tenant asking counts as active at ``now``, admitted or not."""
        verdict = self.check(tenant, request_class, now)
        if tenant in self._last_seen:
            self._last_seen[tenant] = now
        if verdict.admitted:
            self._count(tenant, request_class, +1)
            if self.rates is None:
                self.vtc.start(tenant, input_tokens)
            else:
                self.vtc.start_cost(tenant, self.rates.prefill(input_tokens))
        return verdict

    def release(
        self, tenant: str, request_class: str, output_tokens: int, input_tokens: int = 0
    ) -> None:
        """An admitted request (of ``input_tokens``) completed, or its lease expired, after
        ``output_tokens``."""
        self._count(tenant, request_class, -1)
        if self.rates is None:
            self.vtc.finish(tenant, output_tokens)
        else:
            self.vtc.finish_cost(tenant, self.rates.decode(input_tokens, output_tokens))

    def _count(self, tenant: str, request_class: str, delta: int) -> None:
        held = self.in_flight_by_tenant.get(tenant, 0) + delta
        if held > 0:
            self.in_flight_by_tenant[tenant] = held
        else:
            self.in_flight_by_tenant.pop(tenant, None)
        # twice per request: conditional expressions, not max() (several times dearer)
        found = self.classes.get(request_class)
        retired = found is None
        budget = self._retired[request_class] if found is None else found
        by_class = self.in_flight_by_class
        left = by_class.get(request_class, 0) + delta
        by_class[request_class] = left = left if left > 0 else 0
        if retired and left == 0:
            del self._retired[request_class]
            del by_class[request_class]
        in_flight = self.in_flight + delta
        self.in_flight = in_flight if in_flight > 0 else 0
        if budget.sheddable:
            sheddable = self.sheddable_in_flight + delta
            self.sheddable_in_flight = sheddable if sheddable > 0 else 0
