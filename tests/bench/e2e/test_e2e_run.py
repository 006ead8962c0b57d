"""The comparison's options: what it refuses before starting anything."""

from __future__ import annotations

import pytest

from bench.e2e import E2EOptions
from placement.errors import InputError


def test_options_need_something_to_measure() -> None:
    E2EOptions(loads=(), probe_rate=100.0).check()  # the probe alone
    with pytest.raises(InputError, match="nothing to measure"):
        E2EOptions(loads=(), probe_rate=0.0).check()
    with pytest.raises(InputError, match="unknown router"):
        E2EOptions(routers=("nginx",)).check()
