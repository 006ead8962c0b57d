"""Loading a scenario file: parse and build it (:mod:`placement.whatif.scenario`), then check
it against the fleet, workload and names it refers to (:mod:`placement.whatif.validate`)."""

from __future__ import annotations

from pathlib import Path

from placement.whatif.scenario import Scenario, build_scenario, read_scenario_yaml
from placement.whatif.validate import validate_scenario


def load_scenario(path: str | Path, *, check: bool = True) -> Scenario:
    """Read, build and (with ``check``) validate a scenario file; errors name file and field.

    Validation loads the workload once to check tenant and class names."""
    p = Path(path)
    scenario = build_scenario(read_scenario_yaml(p), source=str(p), folder=p.parent)
    if check:
        validate_scenario(scenario)
    return scenario
