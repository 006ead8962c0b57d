from __future__ import annotations

import pytest
from plan_builders import make_plan

from placement.plan.diff import diff_plans


def test_identical_plans_move_nothing() -> None:
    d = diff_plans(make_plan(), make_plan(version=2))
    assert d.moved_share == 0.0 and not d.groups_moved and not d.caps_changed


def test_moved_group_added_group_and_cap_change() -> None:
    new = make_plan(
        **{
            "version": 2,
            "groups.0.route": {"replicas": ["h100-0", "h100-1"], "weights": [0.5, 0.5]},
            "replicas.1.load_cap_rps": 12.0,
        }
    )
    d = diff_plans(make_plan(), new)
    # the group (2 req/s) moved half; the default (8 req/s) stayed: 1 of 10 req/s moved
    assert d.groups_moved == [(5, pytest.approx(0.5))]
    assert d.moved_share == pytest.approx(0.1)
    assert d.caps_changed == [("h100-1", 10.0, 12.0)]
    other = make_plan(**{"version": 3, "groups.0.key": 6})
    d2 = diff_plans(make_plan(), other)
    assert d2.groups_added == [6] and d2.groups_removed == [5]
