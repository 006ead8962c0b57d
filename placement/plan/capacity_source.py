"""What a plan's ``capacity_source`` names: the registered latency model version its capacities
at SLO came from, and the alias that version was loaded by.

A plan made from the promoted predictor records ``models:/placement-latency/3 (@champion)``:
the version itself (an alias moves, a version does not) and, in brackets, the alias the planner
asked for. A plan made from a version named directly records ``models:/placement-latency/3``.
Anything else (``roofline-prior``, ``fixed``, …) is not a registered model. Plans written
before versions were recorded say ``models:/placement-latency@champion``; they still read, with
no version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: capacities from the roofline prior (datasheet figures), not from a trained model
ROOFLINE_SOURCE = "roofline-prior"

_MODEL_SOURCE = re.compile(
    r"models:/(?P<model>[^/@\s()]+)"
    r"(?:/(?P<version>\d+)(?: \(@(?P<loaded_by>[\w.-]+)\))?|@(?P<alias>[\w.-]+))"
)


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A registered model version behind a plan's capacities (``version`` None: not recorded)."""

    model: str
    version: int | None
    alias: str | None


def model_source(model: str, version: int | str, alias: str | None = None) -> str:
    """The ``capacity_source`` of capacities from ``version`` of ``model``, loaded by ``alias``."""
    source = f"models:/{model}/{int(version)}"
    return source if alias is None else f"{source} (@{alias})"


def parse_model_source(source: str) -> ModelSource | None:
    """The model version a ``capacity_source`` names; None when it names none."""
    match = _MODEL_SOURCE.fullmatch(source)
    if match is None:
        return None
    version = match["version"]
    return ModelSource(
        model=match["model"],
        version=None if version is None else int(version),
        alias=match["loaded_by"] or match["alias"],
    )


def describe(source: str) -> str:
    """A ``capacity_source`` in words, for logs and ``/healthz``: the roofline prior said
    plainly, anything else as recorded."""
    if source == ROOFLINE_SOURCE:
        return "the roofline prior (datasheet figures, not a trained model)"
    return source
