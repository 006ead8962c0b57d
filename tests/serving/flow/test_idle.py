"""Batch work starts only on idle capacity and pauses when interactive load rises."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from serving.flow import IdlePolicy


def test_batch_starts_on_an_idle_fleet_and_pauses_under_interactive_load() -> None:
    p = IdlePolicy(busy_fraction=0.5, batch_fraction=0.25)
    assert p.may_start(waiting_above=0, in_flight=0, batch_in_flight=0, budget=100)
    assert not p.may_start(waiting_above=1, in_flight=0, batch_in_flight=0, budget=100)
    assert not p.may_start(waiting_above=0, in_flight=50, batch_in_flight=0, budget=100)
    assert p.may_start(waiting_above=0, in_flight=49, batch_in_flight=24, budget=100)
    assert not p.may_start(waiting_above=0, in_flight=30, batch_in_flight=25, budget=100)
    assert not p.may_start(waiting_above=0, in_flight=0, batch_in_flight=0, budget=0)


def test_fractions_are_checked() -> None:
    with pytest.raises(InputError, match="busy_fraction"):
        IdlePolicy(busy_fraction=0)
