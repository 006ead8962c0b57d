from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from models.capacity import (
    CapacityTable,
    GeometricAxis,
    MixArrays,
    Slo,
    WorkloadMix,
    build_capacity_table,
    capacity_at_slo,
    replica_kind,
    sequence_slots,
    steady_state,
    steady_state_rows,
)
from models.features import RowInputs, parse_rows
from models.predictor import LatencyArrays, LatencyPredictor, RooflineBaseline
from placement.errors import InputError, UnknownAccelerator

H100 = replica_kind("H100-SXM", "llama-3-8b", 1)
SLOS = (Slo(0.5, 0.03), Slo(2.0, 0.1), Slo(30.0, 0.3))
SMALL_INPUT = GeometricAxis(256.0, 4.0, 3)  # 256, 1024, 4096
SMALL_OUTPUT = GeometricAxis(64.0, 4.0, 2)  # 64, 256


@pytest.fixture(scope="module")
def learned_table(predictor: LatencyPredictor) -> CapacityTable:
    return build_capacity_table(
        H100, predictor, input_axis=SMALL_INPUT, output_axis=SMALL_OUTPUT, slos=SLOS
    )


@pytest.fixture(scope="module")
def prior_table() -> CapacityTable:
    return build_capacity_table(H100, input_axis=SMALL_INPUT, output_axis=SMALL_OUTPUT, slos=SLOS)


@pytest.mark.parametrize("which", ["learned_table", "prior_table"])
def test_looser_slo_never_gives_less_capacity(which: str, request: pytest.FixtureRequest) -> None:
    table: CapacityTable = request.getfixturevalue(which)
    assert np.all(np.diff(table.rates, axis=2) >= 0)
    assert table.rates[..., -1].min() > 0


@pytest.mark.parametrize("which", ["learned_table", "prior_table"])
def test_longer_requests_never_get_more_capacity(
    which: str, request: pytest.FixtureRequest
) -> None:
    table: CapacityTable = request.getfixturevalue(which)
    assert np.all(np.diff(table.rates, axis=0) <= 0)
    assert np.all(np.diff(table.rates, axis=1) <= 0)


@dataclass(frozen=True)
class RateModel:
    """A latency model that is not monotone in load or request size, for the envelope tests:
    p95 TTFT ``ttft_s(λ, I)`` of the request rate ``λ`` and mean prompt ``I`` (p50 TTFT 0.1 s,
    TPOT 10 ms at every quantile)."""

    band: tuple[float, float] = (0.0, 0.0)  # λ (req/s) where p95 TTFT jumps to 10 s
    per_rate_ktokens_s: float = 0.0  # p95 TTFT adds λ · this / (I / 1000) s

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(self.predict_rows(parse_rows(frame)), index=frame.index)

    def predict_rows(self, rows: RowInputs) -> LatencyArrays:
        prompt = rows.prior.input_tokens
        rate = rows.prior.prompt_tokens_per_s / prompt
        lo, hi = self.band
        ttft_p95 = np.where((rate >= lo) & (rate < hi), 10.0, 0.1)
        ttft_p95 = ttft_p95 + rate * self.per_rate_ktokens_s / (prompt / 1000.0)
        n = len(prompt)
        return {
            "ttft_p50": np.full(n, 0.1),
            "ttft_p95": ttft_p95,
            "tpot_p50": np.full(n, 0.01),
            "tpot_p95": np.full(n, 0.01),
        }


def test_capacity_is_the_first_crossing_of_the_load_envelope() -> None:
    # p95 TTFT breaks a 2 s SLO only in a band of rates well below saturation: bisection on
    # the predictions alone lands past the band; the envelope stops at its lower edge
    mix = WorkloadMix(mean_input_tokens=1024, output_tokens=64)
    arrays = MixArrays(
        mean_input=np.array([1024.0]), cached_share=np.array([0.0]), output=np.array([64.0])
    )
    top = float(sequence_slots(H100, arrays)[0]) / (0.1 + 63 * 0.01)
    band = (0.15 * top, 0.3 * top)
    rate = capacity_at_slo(H100, mix, Slo(2.0, 0.1), RateModel(band=band))
    assert band[0] * (1 - 1e-3) <= rate <= band[0]
    # past the band the predictions are within the SLO again, and still do not count
    state = steady_state(RateModel(band=band), H100, arrays, np.array([0.5 * top]))
    assert not state.saturated[0] and state.predicted["ttft_p95"][0] <= 2.0
    assert capacity_at_slo(H100, mix, Slo(2.0, 0.1), RateModel()) > 0.9 * top


@dataclass(frozen=True)
class QueueingModel:
    """p50 TTFT ``gain`` s per running sequence, TPOT 10 ms: at ``gain · λ ≥ 1`` the steady
    state's TTFT feeds itself and never settles."""

    gain: float

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(self.predict_rows(parse_rows(frame)), index=frame.index)

    def predict_rows(self, rows: RowInputs) -> LatencyArrays:
        ttft = 0.1 + self.gain * rows.prior.running
        tpot = np.full(len(ttft), 0.01)
        return {"ttft_p50": ttft, "ttft_p95": ttft, "tpot_p50": tpot, "tpot_p95": tpot}


def test_a_rate_whose_fixed_point_never_settles_counts_as_saturated() -> None:
    mix = MixArrays(
        mean_input=np.array([1024.0, 1024.0]),
        cached_share=np.array([0.0, 0.0]),
        output=np.array([64.0, 64.0]),
    )
    state = steady_state(QueueingModel(gain=1.0), H100, mix, np.array([0.5, 1.0]))
    assert state.running[1] < sequence_slots(H100, mix)[1]  # not out of sequences…
    assert state.saturated.tolist() == [False, True]  # …but still rising at the last step


def test_table_cells_never_exceed_the_cells_of_smaller_requests() -> None:
    # p95 TTFT falls as prompts grow: solved alone, capacity would rise with the prompt
    model = RateModel(per_rate_ktokens_s=1.0)
    table = build_capacity_table(
        H100, model, input_axis=SMALL_INPUT, output_axis=SMALL_OUTPUT, slos=(Slo(2.0, 0.1),)
    )
    direct = np.array(
        [
            [
                capacity_at_slo(
                    H100,
                    WorkloadMix(mean_input_tokens=i, output_tokens=o),
                    Slo(2.0, 0.1),
                    model,
                )
                for o in SMALL_OUTPUT.values
            ]
            for i in SMALL_INPUT.values
        ]
    )
    assert direct[2, 0] > 2 * direct[0, 0]  # the solves do rise with the prompt
    np.testing.assert_array_equal(table.rates[..., 0], np.full_like(direct, direct[0, 0]))
    assert np.all(np.diff(table.rates, axis=0) <= 0)


def test_table_lookup_equals_the_direct_solve_at_grid_points(
    predictor: LatencyPredictor, learned_table: CapacityTable
) -> None:
    for i, j, k in ((0, 0, 0), (1, 1, 1), (2, 0, 2), (2, 1, 1)):
        mean_input, output = SMALL_INPUT.values[i], SMALL_OUTPUT.values[j]
        mix = WorkloadMix(mean_input_tokens=mean_input, output_tokens=output)
        direct = capacity_at_slo(H100, mix, SLOS[k], predictor)
        assert direct > 0
        assert learned_table.lookup(mean_input, output, k) == direct, (i, j, k)


def test_lookup_rounds_tokens_up_and_scales_beyond_the_grid(prior_table: CapacityTable) -> None:
    at_1024 = prior_table.lookup(1024, 256, 1)
    assert prior_table.lookup(300, 100, 1) == at_1024  # → (1024, 256)
    assert prior_table.lookup(1, 1, 1) == prior_table.rates[0, 0, 1]
    assert prior_table.lookup(8192, 256, 1) == pytest.approx(prior_table.rates[2, 1, 1] / 2)


def test_capacity_holds_the_slo_and_a_bit_more_breaks_it(predictor: LatencyPredictor) -> None:
    slo = Slo(2.0, 0.1)
    mix = MixArrays(
        mean_input=np.array([1024.0, 1024.0]),
        cached_share=np.array([0.0, 0.0]),
        output=np.array([256.0, 256.0]),
    )
    rate = capacity_at_slo(
        H100, WorkloadMix(mean_input_tokens=1024, output_tokens=256), slo, predictor
    )
    state = steady_state(predictor, H100, mix, np.array([rate, rate * 1.05]))
    p95 = state.predicted
    assert not state.saturated[0]
    assert p95["ttft_p95"][0] <= slo.ttft_p95_s and p95["tpot_p95"][0] <= slo.tpot_p95_s
    broken = state.saturated[1] or (
        p95["ttft_p95"][1] > slo.ttft_p95_s or p95["tpot_p95"][1] > slo.tpot_p95_s
    )
    assert broken
    # Little's law: the running sequences are the rate times the end-to-end time
    assert state.running[0] == pytest.approx(rate * state.e2e_s[0])


def test_prefix_cache_hits_add_capacity() -> None:
    slo = Slo(2.0, 0.1)
    cold = capacity_at_slo(H100, WorkloadMix(mean_input_tokens=8192, output_tokens=64), slo)
    warm = capacity_at_slo(
        H100, WorkloadMix(mean_input_tokens=8192, output_tokens=64, cached_share=0.75), slo
    )
    assert warm > cold > 0


def test_slower_hardware_has_less_capacity() -> None:
    mix, slo = WorkloadMix(mean_input_tokens=2048, output_tokens=256), Slo(2.0, 0.1)
    l40s = replica_kind("L40S", "llama-3-8b", 1)
    assert capacity_at_slo(l40s, mix, slo) < capacity_at_slo(H100, mix, slo)


def test_unreachable_slo_gives_zero_capacity() -> None:
    mix = WorkloadMix(mean_input_tokens=32768, output_tokens=16)
    assert capacity_at_slo(H100, mix, Slo(0.001, 0.001)) == 0.0


def test_sequence_slots_are_bounded_by_memory_and_max_num_seqs() -> None:
    short = MixArrays(
        mean_input=np.array([100.0]), cached_share=np.array([0.0]), output=np.array([10.0])
    )
    long = MixArrays(
        mean_input=np.array([60000.0]), cached_share=np.array([0.0]), output=np.array([4000.0])
    )
    assert sequence_slots(H100, short)[0] == 256
    assert sequence_slots(H100, long)[0] < 10


def test_slo_index_prefers_exact_then_the_loosest_tighter_level(
    prior_table: CapacityTable,
) -> None:
    assert prior_table.slo_index(Slo(2.0, 0.1)) == 1
    assert prior_table.slo_index(Slo(5.0, 0.2)) == 1
    with pytest.raises(InputError, match="as tight"):
        prior_table.slo_index(Slo(0.1, 0.01))


def test_table_round_trips_through_its_json_form(prior_table: CapacityTable) -> None:
    again = CapacityTable.from_dict(prior_table.to_dict())
    assert again.kind == prior_table.kind
    np.testing.assert_array_equal(again.rates, prior_table.rates)
    assert again.lookup(700, 100, 2) == prior_table.lookup(700, 100, 2)
    broken = prior_table.to_dict() | {"rates": [[1.0]]}
    with pytest.raises(InputError, match="shape"):
        CapacityTable.from_dict(broken)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(UnknownAccelerator):
        replica_kind("Z900", "llama-3-8b", 1)
    with pytest.raises(InputError, match="cached_share"):
        capacity_at_slo(
            H100, WorkloadMix(mean_input_tokens=10, output_tokens=10, cached_share=1.0), SLOS[0]
        )
    with pytest.raises(InputError, match="ratio"):
        GeometricAxis(1.0, 1.0, 3)
    assert isinstance(RooflineBaseline(), RooflineBaseline)


def test_steady_state_backlog_follows_littles_law() -> None:
    mix = MixArrays(
        mean_input=np.array([2000.0]), cached_share=np.array([0.25]), output=np.array([100.0])
    )
    rows = steady_state_rows(H100, mix, np.array([4.0]), np.array([5.0]), np.array([0.5]))
    assert rows["backlog_requests"].iloc[0] == 20  # 4 req/s × 5 s in flight
    assert rows["routed_requests_per_s"].iloc[0] == 4.0  # the router sends it 4 req/s
    assert rows["backlog_prefill_tokens"].iloc[0] == 3000  # 4 × 0.5 s × 1500 uncached tokens
    # two wait for a first token, sent 0.25 s apart over the last 0.5 s: the oldest waited 0.25 s
    assert rows["backlog_oldest_wait_s"].iloc[0] == pytest.approx(0.25)
    # fewer than one waits: none has
    quiet = steady_state_rows(H100, mix, np.array([1.0]), np.array([5.0]), np.array([0.5]))
    assert quiet["backlog_oldest_wait_s"].iloc[0] == 0.0
