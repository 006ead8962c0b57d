"""Fairness under overload: Jain's index of goodput normalised by each tenant's entitlement.

A tenant's entitlement is its credit-weighted max-min fair share of the goodput the fleet
delivered: water-filling the total over tenants in proportion to their credit shares, no tenant
getting more than it offered. Normalising by the bare credit share would call a light tenant
(offering less than its credit) starved; by entitlement it is served in full and counts as fair.
Tenants without a credit share weigh as the smallest positive share.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim.metrics import jain_index


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


def jain_overload(
    goodput: Mapping[str, float], offered: Mapping[str, float], credits: Mapping[str, float]
) -> float:
    """Jain's index over tenants with an entitlement of goodput / entitlement."""
    fair = entitlements(offered, credits, sum(goodput.values()))
    ratios = [goodput.get(t, 0.0) / e for t, e in fair.items() if e > 1e-12]
    return jain_index(ratios) if ratios else 1.0
