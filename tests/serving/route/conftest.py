"""Fixtures for the route path tests (builders in route_builders.py)."""

from __future__ import annotations

import pytest
from route_builders import states

from serving.route import ReplicaState


@pytest.fixture
def four() -> list[ReplicaState]:
    return states(4)
