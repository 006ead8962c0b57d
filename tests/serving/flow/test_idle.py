"""Batch work starts only on idle capacity and pauses when interactive load rises."""

from __future__ import annotations

import pytest

from placement.errors import InputError
from serving.flow import IdlePolicy, shows_load


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


def test_only_a_request_idle_capacity_could_place_shows_load() -> None:
    assert shows_load(service_s=1.0, budget_s=1.2)
    assert shows_load(service_s=1.2, budget_s=1.2)
    assert not shows_load(service_s=1.5, budget_s=1.2)  # its prefill alone is too long
