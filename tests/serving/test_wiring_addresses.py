"""A production service refuses a fleet file whose replicas have no address (it would route to
guessed hosts); development guesses ``<id>:8000`` as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.domain.fleet import load_fleet
from placement.errors import InputError
from placement.paths import repo_root
from serving.api.security import hash_key
from serving.api.settings import ApiKey, Settings
from serving.wiring import build_app, fleet_states

FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"


def test_production_names_the_field_and_the_file(tmp_path: Path) -> None:
    settings = Settings(
        fleet=FLEET,
        plan_dir=tmp_path,
        api_keys=(ApiKey(name="ops", digest=hash_key("k" * 32), scopes=("admin",)),),
    )
    with pytest.raises(InputError) as err:
        build_app(settings)
    assert err.value.field == "replicas[].labels.address"
    assert str(FLEET) in str(err.value) and "h100-0" in str(err.value)


def test_given_addresses_or_development_are_fine() -> None:
    fleet = load_fleet(FLEET)
    given = {r.id: f"10.0.0.{i}:8000" for i, r in enumerate(fleet.replicas)}
    states = fleet_states(fleet, given, require_addresses=True)
    assert [s.address for s in states] == list(given.values())
    guessed = fleet_states(fleet)
    assert guessed[0].address == "h100-0:8000"
