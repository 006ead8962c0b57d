"""Small scenarios for the what-if tests: the synthetic workload over 10 s, a two-kind fleet,
fixed capacities (no predictor, no tables) and a short solver limit."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

BASE_DOC: dict[str, Any] = {
    "name": "tiny",
    "base": {
        "fleet": {
            "name": "tiny",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"},
                {"kind": "l40s", "accelerator": "L40S", "count": 2, "model": "llama-3-8b"},
            ],
        },
        "workload": "synthetic",
        "window_s": 10,
        "seed": 0,
        "fixed_capacity": {"H100-SXM": 12.0, "L40S": 5.0},
        "time_limit_s": 2,
        "simulate": False,
    },
}


@pytest.fixture
def doc() -> dict[str, Any]:
    """A fresh copy of the tiny scenario document to change per test."""
    return copy.deepcopy(BASE_DOC)


@pytest.fixture
def write(tmp_path: Path) -> Any:
    def _write(d: dict[str, Any], name: str = "scenario.yaml") -> Path:
        p = tmp_path / name
        p.write_text(yaml.safe_dump(d))
        return p

    return _write
