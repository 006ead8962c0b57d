"""Capacity at SLO for the solver: one table per replica kind, from the promoted predictor or,
when none is promoted, the roofline prior; the plan records which (``capacity_source``).

A group's traffic is served on replicas that keep its prefix warm, so its capacity is looked up
at its *uncached* prompt length (mean prompt − prefix tokens); defaults at the full prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from models.capacity import DEFAULT_SLOS, CapacityTable, Slo, build_capacity_table, replica_kind
from models.predictor import LatencyModel
from placement.plan.capacity_source import ROOFLINE_SOURCE


class CapacityLookup(Protocol):
    """Capacity at SLO of one replica kind (``CapacityTable`` is one)."""

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float: ...
    def slo_index(self, slo: Slo) -> int: ...


class CapacitySource(Protocol):
    """Where capacity at SLO comes from; ``source`` goes into the plan."""

    @property
    def source(self) -> str: ...
    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup: ...


class HasSlo(Protocol):
    """A request class's SLOs (``placement.domain.requests.RequestClass`` has them)."""

    @property
    def ttft_slo_s(self) -> float: ...
    @property
    def tpot_slo_s(self) -> float: ...


def class_slos(classes: Mapping[str, HasSlo] | Iterable[HasSlo]) -> tuple[Slo, ...]:
    """The SLO levels a table needs for ``classes``: the default levels and each class's own
    (a class tighter than every default level, such as a 0.5-s TTFT, finds no level without
    its own), loosest TTFT last."""
    values = classes.values() if isinstance(classes, Mapping) else classes
    levels = set(DEFAULT_SLOS) | {Slo(c.ttft_slo_s, c.tpot_slo_s) for c in values}
    return tuple(sorted(levels, key=lambda s: (s.ttft_p95_s, s.tpot_p95_s)))


@dataclass
class TableCapacity:
    """Capacity tables built once per replica kind from a latency model (None: the prior),
    at the SLO levels ``slos`` (:func:`class_slos` of the classes to plan for)."""

    latency: LatencyModel | None
    source: str
    note: str = ""
    slos: tuple[Slo, ...] = DEFAULT_SLOS
    _tables: dict[tuple[str, str, int], CapacityTable] = field(default_factory=dict)

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        key = (accelerator, model, tp)
        if key not in self._tables:
            self._tables[key] = build_capacity_table(
                replica_kind(accelerator, model, tp), self.latency, slos=self.slos
            )
        return self._tables[key]


@dataclass(frozen=True)
class FixedCapacity:
    """A fake for tests and what-ifs: the same req/s at every mix and SLO, per accelerator."""

    rates: dict[str, float]
    source: str = "fixed"

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        return _Fixed(self.rates.get(accelerator, 0.0))


@dataclass(frozen=True)
class _Fixed:
    rate: float

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        return self.rate

    def slo_index(self, slo: Slo) -> int:
        return 0


# the champion's capacity tables, kept between solves in the process that built them (the
# planner's worker): (tracking store, version) → tables. Loading a predictor from MLflow and
# tabulating it cost seconds; a promotion changes the version, and the next solve loads that.
_champion_tables: dict[tuple[str, str, tuple[Slo, ...]], TableCapacity] = {}


def default_capacity(slos: tuple[Slo, ...] = DEFAULT_SLOS) -> TableCapacity:
    """The champion latency predictor if one is promoted (the plan records its version:
    ``models:/placement-latency/<v> (@champion)``), else the roofline prior; ``note`` says why
    the prior was used. Tables at the SLO levels ``slos`` (:func:`class_slos`).

    The champion's tables are kept per version when the local store tells the version without
    MLflow: a later call with the same champion reuses them, one after a promotion loads the
    new version (no restart)."""
    from training.tracking import CHAMPION, LATENCY_MODEL, alias_version_in_store, tracking_uri

    lookup = alias_version_in_store(LATENCY_MODEL, CHAMPION)
    if lookup.known and lookup.version is None:  # known without importing MLflow (seconds)
        from training.tracking import missing_champion

        missing = missing_champion() or f"no {CHAMPION} in {tracking_uri()}"
        return TableCapacity(
            None, ROOFLINE_SOURCE, note=f"PredictorUnavailable: {missing}"[:300], slos=slos
        )
    key = (tracking_uri(), lookup.version or "", slos)
    if lookup.version is not None and key in _champion_tables:
        return _champion_tables[key]
    try:
        from training.promote import load_champion

        champion = load_champion()
    except Exception as exc:  # PredictorUnavailable, or the tracking store failing to open
        return TableCapacity(
            None, ROOFLINE_SOURCE, note=f"{type(exc).__name__}: {exc}"[:300], slos=slos
        )
    predictor = champion.predictor
    # a table is ~2,000 predictions of a few rows each: one thread each (measured on the shared
    # 2-core machine: 28 s with LightGBM's two OpenMP threads, 1.2 s with one; same numbers)
    predictor.config = replace(predictor.config, predict_threads=1)
    tables = TableCapacity(predictor, champion.source, slos=slos)
    if lookup.version is not None:
        _champion_tables.clear()  # one champion (and one set of classes) at a time
        _champion_tables[(key[0], champion.version, slos)] = tables
    return tables
