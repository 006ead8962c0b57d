"""Admission by predicted TTFT: a queue bounded in time rather than in requests.

Past a replica's capacity at SLO every request it accepts waits longer than the one before,
and one predicted to miss its TTFT SLO only lengthens the wait of those behind it. The gate
refuses a request (429 with Retry-After) when the route path's predicted TTFT on the chosen
replica exceeds its class's TTFT SLO × ``headroom``, so what is admitted keeps meeting its SLO
and goodput holds at capacity instead of collapsing past the knee.

Fairness: the limit shrinks for tenants over their credit. With ``over_credit`` ∈ [0, 1] the
tenant's place among the active tenants' Virtual Token Counters (0: most owed), the limit is
``SLO × headroom × (1 − credit_cut × over_credit)``, so under overload the tenants furthest over
their share are refused first and those owed keep their credit. Sheddable classes are refused
at ``shed_factor`` of the limit, and under *pressure* — while non-sheddable requests are being
refused (``pressure``: a moving average of their refusals, 0…1, counted from 5%) — a
sheddable request is refused when its tenant's place among the active counters is at or above
``1 − pressure``: a loose SLO (batch) would otherwise let it keep the capacity the interactive
tenants are refused for; lowest priority first and furthest over credit first, as the
admission design says.

A pure object (no clock, no I/O): the service and the simulator run the same gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from placement.domain.requests import RequestClass
from placement.errors import InputError
from serving.admission.vtc import VirtualTokenCounter

DEFAULT_HEADROOM = 1.0
DEFAULT_CREDIT_CUT = 0.5
DEFAULT_SHED_FACTOR = 0.5
PRESSURE_ALPHA = 0.02  # weight of one non-sheddable decision in the pressure average
PRESSURE_FLOOR = 0.05  # below this, the odd refusal is noise, not overload
DEFAULT_PRESSURE_SHARE = 0.5  # how much of the pressure non-sheddable tenants over credit feel


class SloGate:
    def __init__(
        self,
        classes: Mapping[str, RequestClass],
        *,
        headroom: float = DEFAULT_HEADROOM,
        credit_cut: float = DEFAULT_CREDIT_CUT,
        shed_factor: float = DEFAULT_SHED_FACTOR,
        pressure_share: float = DEFAULT_PRESSURE_SHARE,
        vtc: VirtualTokenCounter | None = None,
    ) -> None:
        if not headroom > 0:
            raise InputError(f"{headroom}", field="headroom", expected="> 0")
        if not 0 <= credit_cut < 1:
            raise InputError(f"{credit_cut}", field="credit_cut", expected="in [0, 1)")
        if not 0 < shed_factor <= 1:
            raise InputError(f"{shed_factor}", field="shed_factor", expected="in (0, 1]")
        self.classes = dict(classes)
        self.headroom = headroom
        self.credit_cut = credit_cut
        self.shed_factor = shed_factor
        self.pressure_share = pressure_share
        self.vtc = vtc if vtc is not None else VirtualTokenCounter()
        self.refused: Counter[tuple[str, str]] = Counter()  # (tenant, class) → refusals
        self.pressure = 0.0

    def limit_s(self, tenant: str, request_class: str) -> float:
        """The predicted TTFT above which a request of ``tenant`` and class is refused now."""
        cls = self.classes.get(request_class)
        if cls is None:
            raise InputError(
                f"unknown request class '{request_class}'",
                field="request_class",
                expected="one of " + ", ".join(sorted(self.classes)),
            )
        limit = (
            cls.ttft_slo_s * self.headroom * (1.0 - self.credit_cut * self.vtc.over_credit(tenant))
        )
        return limit * self.shed_factor if cls.sheddable else limit

    def admit(self, tenant: str, request_class: str, predicted_ttft_s: float) -> bool:
        """Admit (and charge the tenant's prompt later with :meth:`started`) or refuse."""
        fits = predicted_ttft_s <= self.limit_s(tenant, request_class)
        ok = fits
        sheddable = self.classes[request_class].sheddable
        if ok and self.pressure >= PRESSURE_FLOOR:
            share = self.pressure if sheddable else self.pressure * self.pressure_share
            ok = self.vtc.over_credit(tenant) < 1.0 - share
        if not sheddable:
            # only SLO refusals measure overload (refusals for credit would feed themselves)
            self.pressure += PRESSURE_ALPHA * ((0.0 if fits else 1.0) - self.pressure)
        if not ok:
            self.refused[(tenant, request_class)] += 1
        return ok

    def started(self, tenant: str, input_tokens: int) -> None:
        self.vtc.start(tenant, input_tokens)

    def finished(self, tenant: str, output_tokens: int) -> None:
        self.vtc.finish(tenant, output_tokens)

    def set_credits(self, shares: Mapping[str, float]) -> None:
        """Tenants' credit shares (a plan's guaranteed shares) weigh their counters."""
        self.vtc.set_credit_weights(shares)
