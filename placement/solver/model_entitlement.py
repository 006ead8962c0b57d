"""Each base model's entitlement in a swap group: the replicas its tenants are owed by their
credits, counted in the unit credits are charged in.

A tenant's credit share is a guaranteed share of what the fleet serves, charged by what a
request costs (GPU-seconds predicted from its tokens: ``serving.admission.cost``, the unit of
the gate's counters and of the loop's fairness figures), not per request. In a swap group
(replicas of one kind) a tenant ``t`` of one of the group's models asks for ``u_t`` replicas
(``Σ_c λ_{t,c} / μ_{m,c}``: its class-``c`` rate over the capacity at that class's SLO of one
replica holding its model, at its own mean prompt and output) and its traffic costs ``D_t``
per second. Served a share ``s_t`` of its traffic, it is charged ``s_t D_t`` and uses
``s_t u_t`` replicas. The group's ``n`` replicas are split max-min fair in the charge: every
tenant is served ``min(D_t, ℓ c_t)`` (credit ``c_t``; tenants without one weigh as the
smallest positive share) at the level ``ℓ`` where the replicas they use add up to ``n`` (or
everyone is served in full). A tenant whose requests cost much per replica they use
(decode-heavy reasoning, where the charge counts each output token at a mid-size batch) is owed
fewer replicas than its share of ``n``. A model's entitlement is the sum of its tenants' replicas,
never more than its demand. Without a price the charge is the replica-time itself (``D_t =
u_t``): the plain credit-weighted water-filling of the replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from models.capacity import Slo
from placement.domain.fleet import ReplicaSpec
from placement.domain.requests import Request, RequestClass, Tenant
from placement.errors import InputError
from placement.solver.capacity import CapacitySource


@dataclass(frozen=True, slots=True)
class TenantDemand:
    """One tenant's traffic on one model of a swap group, over the window."""

    tenant: str
    model: str
    rate: float  # req/s
    replicas: float  # u_t: replicas of the group it keeps busy at its classes' SLOs
    charge: float  # D_t: what its traffic costs per second, in the unit credits are charged in


def tenant_demand(
    requests: Sequence[Request],
    models: Iterable[str],
    replica: ReplicaSpec,
    classes: Mapping[str, RequestClass],
    capacities: Sequence[CapacitySource],
    window_s: float,
    price: Callable[[Request], float] | None = None,
) -> list[TenantDemand]:
    """Each tenant's demand on each of ``models`` held by a replica like ``replica``; with
    several ``capacities`` a class's capacity is the lowest they give (its demand the largest:
    a source that reads a model ample because its telemetry was light does not starve it).
    ``price``: what one request costs (None: its replica-time, ``D_t = u_t``)."""
    wanted = set(models)
    cells: dict[tuple[str, str, str], list[Request]] = {}
    for r in requests:
        if r.model in wanted:
            cells.setdefault((r.model, r.tenant, r.request_class), []).append(r)
    kind = replica.accelerator.kind
    out: dict[tuple[str, str], list[float]] = {}
    for (model, tenant, name), reqs in sorted(cells.items()):
        cls = classes.get(name)
        if cls is None:
            raise InputError(f"request class {name!r} is not defined", field="request_class")
        mean_in = sum(r.input_tokens for r in reqs) / len(reqs)
        mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
        slo = Slo(cls.ttft_slo_s, cls.tpot_slo_s)
        mu = min(_rate(c, kind, model, replica.tp, mean_in, mean_out, slo) for c in capacities)
        rate = len(reqs) / window_s
        u = rate / mu if mu > 0 else 0.0
        cell = out.setdefault((tenant, model), [0.0, 0.0, 0.0])
        cell[0] += rate
        cell[1] += u
        cell[2] += u if price is None else sum(price(r) for r in reqs) / window_s
    return [TenantDemand(t, m, *cell) for (t, m), cell in sorted(out.items())]


def _rate(
    source: CapacitySource,
    kind: str,
    model: str,
    tp: int,
    mean_in: float,
    mean_out: float,
    slo: Slo,
) -> float:
    table = source.table(kind, model, tp)
    mu = table.lookup(mean_in, mean_out, table.slo_index(slo))
    if mu <= 0:  # unreachable at its SLO even alone: at the loosest level the table has
        mu = table.lookup(mean_in, mean_out, 0)
    return mu


#: Bisection steps for the fair level (the replicas used are monotone in it).
LEVEL_STEPS = 60


def model_entitlements(
    demand: Sequence[TenantDemand], tenants: Mapping[str, Tenant], replicas: float
) -> dict[str, float]:
    """Each model's entitlement in replicas: every tenant served ``min(D_t, ℓ c_t)`` of its
    charge at the level ``ℓ`` where the replicas used fill ``replicas`` (see the module)."""
    if replicas < 0:
        raise InputError(f"replicas={replicas}", field="replicas", expected=">= 0")
    asks: dict[str, list[float]] = {}
    for d in demand:
        cell = asks.setdefault(d.tenant, [0.0, 0.0])
        cell[0] += d.replicas
        cell[1] += d.charge
    positive = [t.credit_share for t in tenants.values() if t.credit_share > 0]
    smallest = min(positive) if positive else 1.0
    credit = {
        t: tenants[t].credit_share if t in tenants and tenants[t].credit_share > 0 else smallest
        for t in asks
    }

    def share(t: str, level: float) -> float:
        charge = asks[t][1]
        return 1.0 if charge <= 0 else min(1.0, level * credit[t] / charge)

    def used(level: float) -> float:
        return sum(asks[t][0] * share(t, level) for t in asks)

    top = max((c[1] / credit[t] for t, c in asks.items()), default=0.0)
    level = top
    if used(top) > replicas:
        low, high = 0.0, top
        for _ in range(LEVEL_STEPS):
            mid = (low + high) / 2
            low, high = (mid, high) if used(mid) <= replicas else (low, mid)
        level = low
    out: dict[str, float] = {}
    for d in demand:
        out[d.model] = out.get(d.model, 0.0) + d.replicas * share(d.tenant, level)
    return out
