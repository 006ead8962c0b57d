"""A scenario's new accelerators, known to the catalogue only while its case runs.

:func:`scenario_accelerators` adds the kinds to :data:`placement.domain.accelerators.CATALOGUE`
on entry and removes exactly those on exit, so fleets (``fleet_from_dict``), capacity at SLO
(``models.capacity.replica_kind``) and the simulator's cost models (roofline, since a datasheet
kind has no measured profile) resolve them by name without any of them taking a catalogue
argument. Caches downstream key on the :class:`Accelerator` value, not its name, so two
scenarios giving one name different figures never share a table.

Entering is not thread-safe against another thread resolving names: what-if cases run one per
worker process (``threads_per_worker=1``) or one after another in-process.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from placement.domain.accelerators import _ALIASES, CATALOGUE, Accelerator
from placement.errors import InputError
from placement.whatif.scenario import AcceleratorSpec


def to_accelerator(spec: AcceleratorSpec) -> Accelerator:
    return Accelerator(
        kind=spec.kind,
        dense_bf16_tflops=spec.dense_bf16_tflops,
        hbm_gb=spec.hbm_gb,
        hbm_tbps=spec.hbm_tbps,
        cost_per_hour=spec.cost_per_hour,
        interconnect_gbps=spec.interconnect_gbps,
        boost_clock_ghz=spec.boost_clock_ghz,
        compute_units=spec.compute_units,
        profile=None,
    )


def check_new_kinds(specs: Sequence[AcceleratorSpec], *, source: str) -> None:
    """Refuse a new kind that shadows a catalogue kind or alias, or is given twice."""
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        key = spec.kind.lower()
        if spec.kind in CATALOGUE or key in _ALIASES or key in {k.lower() for k in CATALOGUE}:
            raise InputError(
                f"accelerator {spec.kind!r} is already in the catalogue",
                source=source,
                field=f"accelerators.{i}.kind",
                expected="a new name (the catalogue's figures are used for known kinds)",
            )
        if key in seen:
            raise InputError(
                f"accelerator {spec.kind!r} is defined twice",
                source=source,
                field=f"accelerators.{i}.kind",
            )
        seen.add(key)


@contextmanager
def scenario_accelerators(specs: Sequence[AcceleratorSpec]) -> Iterator[None]:
    """Make ``specs`` resolvable by kind for the duration of the block."""
    added: list[str] = []
    try:
        for spec in specs:
            if spec.kind in CATALOGUE:
                if CATALOGUE[spec.kind] == to_accelerator(spec):
                    continue  # an enclosing block registered the same figures
                raise InputError(
                    f"accelerator {spec.kind!r} is already in the catalogue", field="accelerators"
                )
            CATALOGUE[spec.kind] = to_accelerator(spec)
            added.append(spec.kind)
        yield
    finally:
        for kind in added:
            CATALOGUE.pop(kind, None)
