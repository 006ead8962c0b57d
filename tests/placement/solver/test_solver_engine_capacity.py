"""Capacity at SLO from the engine's iteration times, by the plan's attainment model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import placement.solver.engine_capacity as engine_capacity
from bench.capacity_tables import simulated_capacity
from models.capacity import CapacityTable, GeometricAxis, Slo, build_capacity_table, replica_kind
from placement.domain.fleet import load_fleet
from placement.solver.engine_capacity import (
    ENGINE_SOURCE,
    EngineCapacity,
    InterpolatedTable,
    engine_capacity_table,
    engine_rate,
)

SLO = Slo(2.0, 0.1)
H100 = ("H100-SXM", "llama-3-8b", 1)


def test_the_rate_falls_as_requests_grow_and_as_the_slo_tightens() -> None:
    base = engine_rate(*H100, 750.0, 150.0, SLO)
    assert base is not None and base > 1.0
    longer_prompt = engine_rate(*H100, 3000.0, 150.0, SLO)
    longer_output = engine_rate(*H100, 750.0, 600.0, SLO)
    tighter = engine_rate(*H100, 750.0, 150.0, Slo(0.25, 0.03))
    assert longer_prompt is not None and longer_prompt < base
    assert longer_output is not None and longer_output < base
    assert tighter is not None and tighter < base


def test_an_slo_an_idle_replica_misses_has_no_rate() -> None:
    assert engine_rate(*H100, 60_000.0, 10.0, Slo(0.01, 0.1)) == 0.0


def test_the_rate_is_what_one_simulated_replica_sustains() -> None:
    spec = next(r for r in load_fleet("data/fleets/hetero.yaml").replicas if r.kind == "h100")
    simulated = simulated_capacity(spec, 750, 150, SLO, requests=1_200, steps=7)
    rate = engine_rate(*H100, 750.0, 150.0, SLO)
    assert rate is not None
    assert 0.8 < rate / simulated < 1.25


def _table(rates: np.ndarray) -> CapacityTable:
    return CapacityTable(
        kind=replica_kind(*H100),
        cached_share=0.0,
        input_axis=GeometricAxis(100.0, 2.0, 2),
        output_axis=GeometricAxis(10.0, 2.0, 2),
        slos=(SLO,),
        rates=rates.reshape(2, 2, 1),
    )


def test_the_interpolated_lookup_lies_between_the_grid_points() -> None:
    table = InterpolatedTable(_table(np.asarray([40.0, 20.0, 10.0, 5.0])))
    assert table.lookup(100.0, 10.0, 0) == pytest.approx(40.0)
    assert table.lookup(200.0, 20.0, 0) == pytest.approx(5.0)
    # halfway (in log space) along the input axis: the geometric mean of its neighbours
    assert table.lookup(100 * math.sqrt(2), 10.0, 0) == pytest.approx(math.sqrt(40.0 * 10.0))
    between = table.lookup(150.0, 15.0, 0)
    assert 5.0 < between < 40.0
    # beyond the grid: scaled down in proportion, as the table does
    assert table.lookup(400.0, 20.0, 0) == pytest.approx(2.5)
    # a zero neighbour: the conservative corner, never a log of zero
    assert InterpolatedTable(_table(np.asarray([40.0, 0.0, 10.0, 0.0]))).lookup(150, 15, 0) == 0.0
    assert table.slo_index(SLO) == 0


def test_the_source_builds_each_kinds_table_once() -> None:
    source = EngineCapacity(
        slos=(SLO,),
        input_axis=GeometricAxis(256.0, 4.0, 3),
        output_axis=GeometricAxis(32.0, 4.0, 3),
    )
    assert source.source == ENGINE_SOURCE
    first = source.table(*H100)
    assert source.table(*H100) is first
    assert first.lookup(256.0, 32.0, 0) == pytest.approx(engine_rate(*H100, 256.0, 32.0, SLO) or 0)


def test_a_kind_the_engine_cannot_time_falls_back_to_the_roofline_prior(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_capacity, "_cost_model", lambda *_a: None)
    axis_in, axis_out = GeometricAxis(256.0, 4.0, 2), GeometricAxis(32.0, 4.0, 2)
    table = engine_capacity_table(*H100, slos=(SLO,), input_axis=axis_in, output_axis=axis_out)
    prior = build_capacity_table(
        replica_kind(*H100), None, input_axis=axis_in, output_axis=axis_out, slos=(SLO,)
    )
    assert np.array_equal(table.rates, prior.rates)
    assert engine_rate(*H100, 750.0, 150.0, SLO) is None
