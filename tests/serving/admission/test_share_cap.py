from __future__ import annotations

import math

import pytest

from placement.errors import InputError
from serving.admission.share_cap import LEVEL_REFRESH_S, ShareCap, water_level

SMALL = "llama-3-8b"
LARGE = "llama-3-70b"


def _equal(_: str) -> float:
    return 0.5


def test_the_water_level_fills_what_was_served_capped_at_each_demand() -> None:
    # 10 served among demands 1 (light), 20 and 20, equal weights: the light one gets its 1,
    # the others 4.5 each, a level of 4.5 / weight
    level = water_level([1.0, 20.0, 20.0], [1.0, 1.0, 1.0], 10.0)
    assert level == pytest.approx(4.5)
    assert sum(min(d, level * w) for d, w in ((1.0, 1.0), (20.0, 1.0), (20.0, 1.0))) == (
        pytest.approx(10.0)
    )
    # weights split the level: twice the credit, twice the share
    level = water_level([20.0, 20.0], [2.0, 1.0], 9.0)
    assert 2.0 * level == pytest.approx(6.0)
    assert water_level([1.0, 2.0], [1.0, 1.0], 3.0) == math.inf  # everyone served in full


def test_a_tenant_served_past_the_cap_while_another_is_owed_yields() -> None:
    caps = ShareCap(1.5, window_s=30.0)
    for k in range(20):
        now = float(k)
        caps.offer(SMALL, "greedy", 4.0, now)
        caps.serve(SMALL, "greedy", 4.0, now)  # all it asks
        caps.offer(SMALL, "owed", 4.0, now)
        caps.serve(SMALL, "owed", 1.0, now)  # a quarter: refused for room
    # equal credits: each is entitled to half of the 5 a second served (2.5); greedy took 4
    assert caps.ratio(SMALL, "greedy", _equal, 20.0) == pytest.approx(1.6, rel=0.01)
    assert caps.ratio(SMALL, "owed", _equal, 20.0) == pytest.approx(0.4, rel=0.01)
    assert caps.yields_for(SMALL, "greedy", _equal, 20.0) == pytest.approx(
        30.0 * math.log(1.6 / 1.5), rel=0.05
    )
    assert caps.yields_for(SMALL, "owed", _equal, 20.0) == 0.0
    # another pool's shares are its own: nobody is owed there
    caps.offer(LARGE, "greedy", 4.0, 20.0)
    caps.serve(LARGE, "greedy", 4.0, 20.0)
    assert caps.yields_for(LARGE, "greedy", _equal, 20.0) == 0.0
    assert caps.ratio(SMALL, "unknown", _equal, 20.0) == 0.0


def test_nobody_yields_while_every_tenant_is_served_what_it_asks() -> None:
    """Work-conserving: a tenant taking far more than its credit's share yields nothing while
    the others get all they ask for."""
    caps = ShareCap(1.0)
    weights = {"big": 0.01, "light": 0.99}.__getitem__
    for k in range(50):
        now = k * 0.1
        for tenant, cost in (("big", 9.0), ("light", 1.0)):
            caps.offer(SMALL, tenant, cost, now)
            caps.serve(SMALL, tenant, cost, now)
    assert caps.level(SMALL, weights, 5.0) == math.inf
    assert caps.yields_for(SMALL, "big", weights, 5.0) == 0.0
    # once the light tenant is refused half of what it asks, the big one is past its share
    for k in range(50, 100):
        now = k * 0.1
        caps.offer(SMALL, "big", 9.0, now)
        caps.serve(SMALL, "big", 9.0, now)
        caps.offer(SMALL, "light", 2.0, now)
        caps.serve(SMALL, "light", 1.0, now)
    assert caps.yields_for(SMALL, "big", weights, 10.0 + LEVEL_REFRESH_S) > 0.0


def test_a_share_is_over_the_recent_window_not_the_tenants_history() -> None:
    """A tenant that took everything a minute ago and has been within its share since is no
    longer over it: service decays with the window."""
    caps = ShareCap(1.5, window_s=10.0)
    for k in range(30):  # 0–30 s: greedy takes 9 of every 10 served, owed is refused
        now = float(k)
        caps.offer(SMALL, "greedy", 9.0, now)
        caps.serve(SMALL, "greedy", 9.0, now)
        caps.offer(SMALL, "owed", 9.0, now)
        caps.serve(SMALL, "owed", 1.0, now)
    assert caps.yields_for(SMALL, "greedy", _equal, 30.0) > 0.0
    for k in range(30, 90):  # then both served alike
        now = float(k)
        for tenant in ("greedy", "owed"):
            caps.offer(SMALL, tenant, 9.0, now)
            caps.serve(SMALL, tenant, 5.0, now)
    assert caps.ratio(SMALL, "greedy", _equal, 90.0) == pytest.approx(1.0, abs=0.01)
    assert caps.yields_for(SMALL, "greedy", _equal, 90.0) == 0.0


@pytest.mark.parametrize(("cap", "window"), [(0.9, 30.0), (1.5, 0.0), (math.nan, 30.0)])
def test_a_cap_under_the_entitlement_or_an_empty_window_is_refused(
    cap: float, window: float
) -> None:
    with pytest.raises(InputError):
        ShareCap(cap, window_s=window)
