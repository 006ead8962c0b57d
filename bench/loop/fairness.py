"""Fairness under overload: Jain's index of goodput normalised by each tenant's entitlement.

A tenant's entitlement is its credit-weighted max-min fair share of the goodput the fleet
delivered: water-filling the total over tenants in proportion to their credit shares, no tenant
getting more than it offered. Normalising by the bare credit share would call a light tenant
(offering less than its credit) starved; by entitlement it is served in full and counts as fair.
Tenants without a credit share weigh as the smallest positive share. Goodput and offered load
are counted in the unit credits are charged in: GPU-seconds (:func:`request_gpu_seconds`).

The index is taken over tenants with at least :data:`MIN_TENANT_REQUESTS` requests in the
window (all of them still share in the water-filling). A tenant's ratio moves in steps of one
of its requests: a tenant with a single request of 76 weighted tokens/s against an entitlement
of 32 can only score 0 (refused) or 2.4 (served), and one such tenant among twenty pulls the
index from 0.99 to 0.91 whatever the policy does. :func:`jain_overload` with ``min_requests=1``
gives the index over every tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from placement.domain.fleet import Fleet
from serving.admission.cost import mean_rates
from sim.metrics import RequestTable, jain_index

MIN_TENANT_REQUESTS = 20  # a ratio in steps of ≤ 5% of the tenant's work


def entitlements(
    offered: Mapping[str, float], credits: Mapping[str, float], total: float
) -> dict[str, float]:
    """Credit-weighted max-min fair split of ``total`` capped at each tenant's offered rate."""
    tenants = sorted(offered)
    if not tenants:
        return {}
    positive = [c for c in credits.values() if c > 0]
    floor = min(positive) if positive else 1.0
    w = np.asarray([credits.get(t, 0.0) or floor for t in tenants], dtype=np.float64)
    demand = np.asarray([offered[t] for t in tenants], dtype=np.float64)
    share = np.zeros(len(tenants))
    left = min(total, float(demand.sum()))
    open_ = demand > 0
    while left > 1e-12 and open_.any():
        grant = left * w * open_ / w[open_].sum()
        room = demand - share
        full = open_ & (grant >= room)
        if not full.any():
            share += grant
            break
        share[full] = demand[full]
        left -= float(room[full].sum())
        open_ &= ~full
    return dict(zip(tenants, share.tolist(), strict=True))


def entitled_ratios(
    goodput: Mapping[str, float], offered: Mapping[str, float], credits: Mapping[str, float]
) -> dict[str, float]:
    """goodput / entitlement for every tenant with an entitlement."""
    fair = entitlements(offered, credits, sum(goodput.values()))
    return {t: goodput.get(t, 0.0) / e for t, e in fair.items() if e > 1e-12}


def jain_overload(
    goodput: Mapping[str, float],
    offered: Mapping[str, float],
    credits: Mapping[str, float],
    requests: Mapping[str, int] | None = None,
    min_requests: int = MIN_TENANT_REQUESTS,
) -> float:
    """Jain's index of goodput / entitlement over tenants with at least ``min_requests``
    requests (every tenant when ``requests`` is None)."""
    ratios = [
        x
        for t, x in entitled_ratios(goodput, offered, credits).items()
        if requests is None or requests.get(t, 0) >= min_requests
    ]
    return jain_index(ratios) if ratios else 1.0


def request_gpu_seconds(fleet: Fleet, table: RequestTable) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Each request's GPU-seconds on the fleet's average replica (:func:`serving.admission.
    cost.mean_rates`), its cached prompt tokens (as served) discounted — one price for a request
    wherever it ran, so a tenant is not charged more for being sent to a slower replica."""
    rates = mean_rates((r.accelerator.kind, r.model.name, r.tp) for r in fleet.replicas)
    return rates.requests(table.input_tokens, table.cached_tokens, table.output_tokens)
