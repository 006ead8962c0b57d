"""Accelerator kinds and their public datasheet figures (the roofline prior's inputs).

The catalogue is data: ``data/catalogue/accelerators.yaml`` (shipped), then every folder of
``PLACEMENT_PROFILES`` and of ``--profiles`` (see :mod:`placement.domain.catalogue_files` for the
format and :func:`placement.domain.catalogue.add_profile_folders`). :data:`CATALOGUE` maps each
kind to its :class:`Accelerator`; :func:`get_accelerator` also takes the entries' aliases.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from placement.domain.catalogue_files import (
    AcceleratorEntry,
    Located,
    MeasurementColumns,
    check_folder,
    check_unique,
    env_folders,
    read_accelerators,
    resolve_file,
    resolve_profile,
    shipped_folder,
)
from placement.errors import InputError, UnknownAccelerator


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurements:
    """End-to-end measurements of one accelerator: the rows of ``file`` (``shared:<path>`` or
    absolute) whose hardware column is ``hardware`` (and framework ``framework`` if given)."""

    file: str
    columns: MeasurementColumns
    hardware: str
    framework: str | None = None
    hbm_gb: float | None = None  # memory per GPU of the measured GPUs, when not the kind's


@dataclass(frozen=True, slots=True, kw_only=True)
class Accelerator:
    """One accelerator kind.

    ``profile`` names the folder of measured operator tables (a name searched in every profiles
    folder, or an absolute path) when there is one; kinds without it fall back to the
    datasheet-transferred roofline. ``measurements`` are end-to-end measurements of it.
    """

    kind: str
    dense_bf16_tflops: float
    hbm_gb: float
    hbm_tbps: float
    cost_per_hour: float
    profile: str | None = None
    # intra-node interconnect bandwidth per GPU, GB/s (for the all-reduce roofline)
    interconnect_gbps: float = 450.0
    dense_fp8_tflops: float | None = None
    # maximum boost clock, GHz: kernels' launch floors and ramps are counts of its cycles
    boost_clock_ghz: float | None = None
    # streaming multiprocessors (AMD: compute units): GEMM tiles are spread over them, the
    # softmax's exponentials run on their special-function units
    compute_units: int | None = None
    measurements: tuple[Measurements, ...] = ()


CATALOGUE: dict[str, Accelerator] = {}
_ALIASES: dict[str, str] = {}
# an unreadable PLACEMENT_PROFILES folder, reported by the first lookup (not at import time,
# where it would escape the CLI's one-line errors)
_PENDING: list[InputError] = []


def accelerator_from_entry(located: Located[AcceleratorEntry]) -> Accelerator:
    """The :class:`Accelerator` of a catalogue entry (relative paths taken from its file)."""
    e, source = located.entry, located.source
    return Accelerator(
        kind=e.kind,
        dense_bf16_tflops=e.dense_bf16_tflops,
        dense_fp8_tflops=e.dense_fp8_tflops,
        hbm_gb=e.hbm_gb,
        hbm_tbps=e.hbm_tbps,
        interconnect_gbps=e.interconnect_gbps,
        boost_clock_ghz=e.boost_clock_ghz,
        compute_units=e.compute_units,
        cost_per_hour=e.cost_per_hour,
        profile=resolve_profile(e.profile, source),
        measurements=tuple(
            Measurements(
                file=resolve_file(m.file, source),
                columns=m.columns,
                hardware=m.hardware,
                framework=m.framework,
                hbm_gb=m.hbm_gb,
            )
            for m in e.measurements
        ),
    )


def register_accelerators(entries: Iterable[Located[AcceleratorEntry]]) -> list[Accelerator]:
    """Add (or replace, by kind) catalogue entries; returns the accelerators registered."""
    entries = list(entries)
    by_file: dict[str, list[str]] = {}
    for located in entries:
        by_file.setdefault(str(located.source), []).append(located.entry.kind)
    for located in entries:
        check_unique(by_file[str(located.source)], located.source, "accelerators")
    added: list[Accelerator] = []
    for located in entries:
        accelerator = accelerator_from_entry(located)
        CATALOGUE[accelerator.kind] = accelerator
        for name in (accelerator.kind, *located.entry.aliases):
            _ALIASES[name.lower()] = accelerator.kind
        added.append(accelerator)
    return added


def get_accelerator(
    kind: str, *, source: str | None = None, field: str | None = None
) -> Accelerator:
    """Look an accelerator up by kind or a common alias (case-insensitive)."""
    if _PENDING:
        raise _PENDING[0]
    if kind in CATALOGUE:
        return CATALOGUE[kind]
    canonical = _ALIASES.get(kind.lower())
    if canonical is None or canonical not in CATALOGUE:
        raise UnknownAccelerator(
            f"unknown accelerator '{kind}'",
            source=source,
            field=field,
            expected="one of "
            + ", ".join(sorted(CATALOGUE))
            + " (or add it: an accelerators.yaml in a PLACEMENT_PROFILES folder)",
        )
    return CATALOGUE[canonical]


def accelerator_names() -> tuple[str, ...]:
    """Every name :func:`get_accelerator` knows as spelt here: the kinds, then their aliases."""
    return (*sorted(CATALOGUE), *sorted(set(_ALIASES) - set(CATALOGUE)))


def _load() -> None:
    register_accelerators(read_accelerators(shipped_folder()))
    for folder in env_folders():
        try:
            register_accelerators(read_accelerators(check_folder(folder)))
        except InputError as exc:
            _PENDING.append(exc)


_load()
