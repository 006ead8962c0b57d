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

TPOT: the TTFT bound says nothing of decoding, and on a slow replica (an L40S with prompts
chunked into every iteration) admitted requests meet their TTFT and miss their TPOT. The gate
also refuses a replica whose router-observed TPOT (:attr:`ReplicaState.tpot_s`, a moving average
over its completions) is past the class's TPOT SLO × ``tpot_headroom``.

Before refusing, the gate looks once more (:meth:`SloGate.admit_decision`): the route path's
choice favours the replica holding the request's prefix, and a long prompt too slow behind that
replica's queue may still meet its SLO on the replica with the least predicted TTFT among those
decoding within the TPOT limit.

A pure object (no clock, no I/O): the service and the simulator run the same gate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from placement.domain.requests import RequestClass
from placement.errors import InputError
from serving.admission.vtc import VirtualTokenCounter

if TYPE_CHECKING:
    from serving.route.types import Decision, RoutePath, RouteQuery

DEFAULT_HEADROOM = 1.0
DEFAULT_CREDIT_CUT = 0.5
DEFAULT_SHED_FACTOR = 0.5
# a replica whose observed TPOT is past 0.8 × the class's TPOT SLO takes no more of its
# requests (chosen on the heads of the mixed and synthetic traces on the mixed fleet: 1.0 let
# 3–9% of admitted requests miss TPOT at 1–3× load, 0.8 halves that and serves more)
DEFAULT_TPOT_HEADROOM = 0.8
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
        tpot_headroom: float = DEFAULT_TPOT_HEADROOM,
        vtc: VirtualTokenCounter | None = None,
    ) -> None:
        if not headroom > 0:
            raise InputError(f"{headroom}", field="headroom", expected="> 0")
        if not 0 <= credit_cut < 1:
            raise InputError(f"{credit_cut}", field="credit_cut", expected="in [0, 1)")
        if not tpot_headroom > 0:
            raise InputError(f"{tpot_headroom}", field="tpot_headroom", expected="> 0")
        if not 0 < shed_factor <= 1:
            raise InputError(f"{shed_factor}", field="shed_factor", expected="in (0, 1]")
        self.classes = dict(classes)
        self.headroom = headroom
        self.credit_cut = credit_cut
        self.shed_factor = shed_factor
        self.pressure_share = pressure_share
        self.tpot_headroom = tpot_headroom
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

    def tpot_limit_s(self, request_class: str) -> float:
        """The observed TPOT above which a replica takes no more requests of this class."""
        return self.classes[request_class].tpot_slo_s * self.tpot_headroom

    def admit(
        self,
        tenant: str,
        request_class: str,
        predicted_ttft_s: float,
        observed_tpot_s: float = 0.0,
    ) -> bool:
        """Admit (and charge the tenant's prompt later with :meth:`started`) or refuse."""
        fits = predicted_ttft_s <= self.limit_s(tenant, request_class)
        fits = fits and observed_tpot_s <= self.tpot_limit_s(request_class)
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

    def admit_decision(
        self, path: RoutePath, query: RouteQuery, decision: Decision, now: float
    ) -> Decision | None:
        """Admit ``decision`` — or, when it would miss (predicted TTFT over the limit, or the
        replica's observed TPOT over its limit), the route path's fastest replica if that one
        would not — and charge the prompt; None when refused."""
        tenant, cls = query.tenant, query.request_class
        ttft_limit, tpot_limit = self.limit_s(tenant, cls), self.tpot_limit_s(cls)
        tpot = _observed_tpot(path, decision)
        if decision.predicted_ttft_s > ttft_limit or tpot > tpot_limit:
            faster = path.fastest(query, now, max_tpot_s=tpot_limit)
            if faster is not None and faster.predicted_ttft_s <= ttft_limit:
                decision, tpot = faster, _observed_tpot(path, faster)
        if not self.admit(tenant, cls, decision.predicted_ttft_s, tpot):
            return None
        self.started(tenant, query.input_tokens)
        return decision

    def started(self, tenant: str, input_tokens: int) -> None:
        self.vtc.start(tenant, input_tokens)

    def finished(self, tenant: str, output_tokens: int) -> None:
        self.vtc.finish(tenant, output_tokens)

    def set_credits(self, shares: Mapping[str, float]) -> None:
        """Tenants' credit shares (a plan's guaranteed shares) weigh their counters."""
        self.vtc.set_credit_weights(shares)


def _observed_tpot(path: RoutePath, decision: Decision) -> float:
    state = path.replica(decision.replica_id)
    return 0.0 if state is None else state.tpot_s
