"""Serving-stack calibration: physical bounds, affine structure, and a fit that recovers the truth."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest

from placement.domain.llm import ModelArchitecture, get_model
from placement.errors import InputError
from sim.costmodel.stack import (
    NEUTRAL_STACK,
    CalibratedCostModel,
    StackCalibration,
    fit_stack_calibration,
    predicted_s,
    stack_sensitivities,
)

LLAMA_70B = get_model("llama-2-70b")
TRUE_STACK = StackCalibration(
    host_overhead_s=9e-3,
    all_reduce_hop_latency_s=15e-6,
    compute_factor=1.3,
    prefill_sequence_s=5e-3,
)


@dataclass(frozen=True, slots=True)
class FakeKernels:
    """Hand-computable kernel times of a ``tp``-way replica: a weight-read floor plus compute."""

    tp: int
    model: ModelArchitecture = LLAMA_70B
    framework_overhead_s: float = 0.0
    attention_fixed_s: float = 1e-3

    @property
    def overhead_s(self) -> float:
        return self.framework_overhead_s + self.attention_fixed_s

    def linear_s(self, tokens: int) -> float:
        return 0.0 if tokens <= 0 else 0.09 / self.tp + 2.5e-4 / self.tp * tokens

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        return 4e-9 / self.tp * chunk_tokens * (context_tokens + chunk_tokens / 2)

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        return (2e-5 * n, 3e-8 / self.tp)

    def iteration_s(
        self, prefill_chunks: list[tuple[int, int]], n_decode: int, decode_context: int
    ) -> float:
        tokens = n_decode + sum(c for c, _ in prefill_chunks)
        attention = sum(self.prefill_attention_s(c, p) for c, p in prefill_chunks)
        d0, d1 = self.decode_attention_coeffs(n_decode)
        return self.overhead_s + self.linear_s(tokens) + attention + d0 + d1 * decode_context


def _prefill(cm, batch, prompt):
    return cm.iteration_s([(prompt, 0)] * batch, 0, 0)


def _decode(cm, batch, context):
    return cm.iteration_s([], batch, batch * context)


def _workload():
    """(base, predict) of decodes and prefills at TP 2/4/8, like the Splitwise grid."""
    cases = []
    for tp in (2, 4, 8):
        base = FakeKernels(tp)
        for batch, context in [(1, 512), (1, 8192), (8, 1024), (64, 640)]:
            cases.append((base, partial(_decode, batch=batch, context=context)))
        for batch, prompt in [(1, 128), (1, 2048), (1, 8192), (4, 512), (16, 512)]:
            cases.append((base, partial(_prefill, batch=batch, prompt=prompt)))
    return cases


def _measured(stack, noise=None):
    y = np.asarray([predict(CalibratedCostModel(base, stack)) for base, predict in _workload()])
    return y if noise is None else y * noise


def _fit(measured):
    neutral, slopes = zip(*(stack_sensitivities(b, p) for b, p in _workload()), strict=True)
    return fit_stack_calibration(measured, neutral, slopes)


def _close(fitted, truth, rel):
    for name, value in truth.as_dict().items():
        assert getattr(fitted, name) == pytest.approx(value, rel=rel), name


def test_fit_recovers_the_stack_that_generated_the_data():
    _close(_fit(_measured(TRUE_STACK)), TRUE_STACK, rel=1e-4)


def test_fit_is_close_under_noise_and_shrugs_off_outliers():
    rng = np.random.default_rng(7)
    noise = np.exp(rng.normal(0.0, 0.02, len(_workload())))
    noise[[3, 17]] *= 2.5  # two broken measurements
    fitted = _fit(_measured(TRUE_STACK, noise))
    assert fitted.compute_factor == pytest.approx(TRUE_STACK.compute_factor, rel=0.05)
    assert fitted.all_reduce_hop_latency_s == pytest.approx(15e-6, rel=0.2)
    assert fitted.host_overhead_s == pytest.approx(9e-3, rel=0.25)


def test_fit_stays_within_physical_bounds():
    # kernels three times slower than the tables and a stack faster than zero overhead:
    # the factor stops at its bound, latencies at zero
    slow = np.asarray([p(FakeKernels(b.tp)) for b, p in _workload()]) * 3.0
    assert _fit(slow).compute_factor == pytest.approx(2.0)
    fast = np.asarray([p(FakeKernels(b.tp)) for b, p in _workload()]) * 0.9
    fitted = _fit(fast)
    assert fitted.host_overhead_s >= 0.0 and fitted.all_reduce_hop_latency_s >= 0.0
    assert fitted.prefill_sequence_s >= 0.0 and fitted.compute_factor >= 0.5


def test_sensitivities_are_exact_for_any_stack():
    base, predict = _workload()[-1]
    neutral, slopes = stack_sensitivities(base, predict)
    for stack in (TRUE_STACK, StackCalibration(compute_factor=0.7, prefill_sequence_s=0.02)):
        direct = predict(CalibratedCostModel(base, stack))
        via_terms = predicted_s(np.asarray([neutral]), np.asarray([slopes]), stack)[0]
        assert via_terms == pytest.approx(direct, rel=1e-9)


def test_neutral_stack_is_the_base_without_its_host_overhead():
    base = FakeKernels(4, framework_overhead_s=3.6e-3)
    cm = CalibratedCostModel(base, NEUTRAL_STACK)
    assert cm.overhead_s == pytest.approx(base.attention_fixed_s)
    for chunks, n, ctx in [([(512, 0)], 0, 0), ([(64, 1024)], 8, 9000), ([], 32, 40000)]:
        expected = base.iteration_s(chunks, n, ctx) - base.framework_overhead_s
        assert cm.iteration_s(chunks, n, ctx) == pytest.approx(expected, rel=1e-12)


def test_stack_terms_have_their_physical_meaning():
    base = FakeKernels(8)
    cm = CalibratedCostModel(base, TRUE_STACK)
    # host overhead replaces the base's; 2 all-reduces per layer over 7 ring hops
    assert cm.overhead_s == pytest.approx(base.attention_fixed_s + 9e-3)
    assert cm.all_reduce_latency_s == pytest.approx(2 * 80 * 7 * 15e-6)
    # the one-token floor (weight read) is not slowed down; the growth above it is
    floor = base.linear_s(1)
    assert cm.linear_s(1) == pytest.approx(floor + cm.all_reduce_latency_s)
    growth = base.linear_s(4096) - floor
    assert cm.linear_s(4096) - cm.linear_s(1) == pytest.approx(1.3 * growth)
    assert cm.linear_s(0) == 0.0
    # each prefill chunk pays its scaled attention and the per-sequence cost
    assert cm.prefill_attention_s(512, 0) == pytest.approx(
        1.3 * base.prefill_attention_s(512, 0) + 5e-3
    )
    # a TP1 replica has no all-reduce to slow down
    assert CalibratedCostModel(FakeKernels(1), TRUE_STACK).all_reduce_latency_s == 0.0


def test_decode_stays_affine_in_summed_context():
    cm = CalibratedCostModel(FakeKernels(4), TRUE_STACK)
    d0, d1 = cm.decode_attention_coeffs(16)
    times = [cm.iteration_s([], 16, c) for c in (0, 10_000, 20_000)]
    assert times[2] - times[1] == pytest.approx(times[1] - times[0])
    assert times[0] == pytest.approx(cm.overhead_s + cm.linear_s(16) + d0)
    assert times[1] - times[0] == pytest.approx(d1 * 10_000)


@pytest.mark.parametrize(
    "kwargs",
    [{"compute_factor": 2.5}, {"compute_factor": 0.4}, {"host_overhead_s": -1e-3}],
)
def test_unphysical_stacks_are_refused(kwargs):
    with pytest.raises(InputError):
        StackCalibration(**kwargs)


def test_fit_refuses_too_few_cases_or_nonpositive_times():
    with pytest.raises(InputError, match="at least 4"):
        fit_stack_calibration([0.1], [0.1], [[1.0, 1.0, 1.0, 1.0]])
    with pytest.raises(InputError, match="positive"):
        fit_stack_calibration([0.1, 0.0, 0.2, 0.3], [0.1] * 4, [[1.0, 1.0, 1.0, 1.0]] * 4)


def test_offsets_round_trip():
    assert StackCalibration.from_offsets(TRUE_STACK.offsets().tolist()) == TRUE_STACK
    assert not NEUTRAL_STACK.offsets().any()


def test_memory_attention_and_per_sequence_terms_have_their_physical_meaning():
    base = FakeKernels(4)
    stack = StackCalibration(
        memory_factor=1.5, attention_factor=2.0, decode_sequence_s=1e-4, all_reduce_byte_s=1e-11
    )
    cm = CalibratedCostModel(base, stack)
    floor = base.linear_s(1)
    ring_bytes = 2 * 80 * (2 * 3 / 4) * LLAMA_70B.hidden * 2  # per token, all layers
    assert cm.linear_s(1) == pytest.approx(1.5 * floor + ring_bytes * 1e-11)
    assert cm.linear_s(100) - cm.linear_s(1) == pytest.approx(
        base.linear_s(100) - floor + 99 * ring_bytes * 1e-11
    )
    d0, d1 = base.decode_attention_coeffs(8)
    assert cm.decode_attention_coeffs(8) == pytest.approx((2.0 * d0 + 8e-4, 2.0 * d1))


def test_decode_flops_cost_each_decoding_sequence_its_parameters_per_gpu():
    # 1e-14 s per FLOP (100 TFLOP/s) on each sequence's 2 * active params / tp, decode only
    stack = StackCalibration(decode_flop_s=1e-14)
    for tp in (2, 8):
        base = FakeKernels(tp)
        cm = CalibratedCostModel(base, stack)
        d0, d1 = base.decode_attention_coeffs(16)
        per_sequence = 2 * LLAMA_70B.active_params / tp * 1e-14
        assert cm.decode_attention_coeffs(16) == pytest.approx((d0 + 16 * per_sequence, d1))
        assert cm.linear_s(4096) == pytest.approx(base.linear_s(4096))  # prefill GEMMs unchanged
        assert cm.prefill_attention_s(512, 0) == pytest.approx(base.prefill_attention_s(512, 0))
    with pytest.raises(InputError, match="negative"):
        StackCalibration(decode_flop_s=-1e-14)


def test_only_free_parameters_move_and_shrinkage_holds_the_rest_near_neutral():
    truth = StackCalibration(host_overhead_s=9e-3, compute_factor=1.3)
    measured = _measured(truth)
    neutral, slopes = zip(*(stack_sensitivities(b, p) for b, p in _workload()), strict=True)
    fitted = fit_stack_calibration(
        measured, neutral, slopes, free=("host_overhead_s", "compute_factor")
    )
    assert fitted.host_overhead_s == pytest.approx(9e-3, rel=1e-3)
    assert fitted.memory_factor == 1.0 and fitted.prefill_sequence_s == 0.0
    few = fit_stack_calibration(
        measured[:2], neutral[:2], slopes[:2], free=("host_overhead_s", "memory_factor"), shrink=1.0
    )
    assert abs(few.memory_factor - 1.0) < 0.5
    with pytest.raises(InputError, match="unknown stack parameter"):
        fit_stack_calibration(measured, neutral, slopes, free=("warp_factor",))


def test_fit_recovers_every_parameter_whatever_its_units():
    """s/FLOP (1e-14), s/byte (1e-11), s/hop (1e-5) and factors (1) at once: the fit steps each
    in its own units, so the smallest ones are found as exactly as the factors."""
    truth = StackCalibration(
        host_overhead_s=6e-3,
        all_reduce_hop_latency_s=8e-6,
        compute_factor=1.2,
        prefill_sequence_s=2e-3,
        memory_factor=1.1,
        attention_factor=1.4,
        decode_sequence_s=3e-5,
        all_reduce_byte_s=2e-11,
        decode_flop_s=2e-14,
    )
    neutral, slopes = zip(*(stack_sensitivities(b, p) for b, p in _workload()), strict=True)
    fitted = fit_stack_calibration(_measured(truth), neutral, slopes, free=tuple(truth.as_dict()))
    _close(fitted, truth, rel=1e-3)


def test_a_calibrated_model_hands_over_between_gpus_at_the_stacks_hop_latency() -> None:
    from placement.domain.accelerators import get_accelerator
    from placement.domain.llm import get_model
    from sim.costmodel.roofline import RooflineCostModel
    from sim.costmodel.stack import CalibratedCostModel, StackCalibration

    base = RooflineCostModel(get_accelerator("H100-SXM"), get_model("llama-3-8b"), 1)
    stack = StackCalibration(all_reduce_hop_latency_s=7e-6)
    assert CalibratedCostModel(base, stack).hop_latency_s == 7e-6
