"""Roofline iteration-time model for accelerators without measured operator tables.

By default (``efficiency=None``) every operator costs its speed of light divided by the
utilization that :mod:`sim.costmodel.transfer` learned by shape on the profiled accelerators
(the shipped surfaces, or the ``transfer`` given): the datasheet fallback. The tables it
predicts are tabulated exactly as measured ones are
(:class:`~sim.costmodel.profiled.ProfiledCostModel`).

With an explicit ``efficiency`` it is the plain two-parameter roofline below, where every
operator of :mod:`sim.costmodel.operators` costs

    max(flops / (peak · eff_compute), bytes / (bandwidth · eff_memory))

with ``peak`` the dense BF16 datasheet figure and ``bandwidth`` HBM bandwidth (the interconnect
bandwidth per GPU for the all-reduce, a ring moving ``2·(tp-1)/tp`` of the message). The two
efficiencies are fitted against :class:`~sim.costmodel.profiled.ProfiledCostModel` on the
profiled accelerators (see :func:`fit_efficiency` and :func:`profiled_samples`):

    FITTED_EFFICIENCY = fit_efficiency(profiled_samples())

i.e. a grid search (step 0.01) minimising the squared log-ratio to the profiled times of
``linear_s`` (m = 1 … 16384), prefill attention (chunks of 512 … 8192 tokens) and the decode
attention slope, for llama-3-8b TP1, qwen2.5-32b TP2, llama-2-70b TP4 and mixtral-8x7b TP2 on
every profiled accelerator whose tables cover them (132 samples; L40S has no all-reduce table,
so only its TP1 model counts). Result: compute 0.45, memory 0.72; per sample the roofline lands
within 0.27–2.4× of the profiled time (worst: 512-token prefill attention, which the roofline
finds too cheap, and L40S decode attention, which its large L2 cache makes cheaper than HBM).
The fitted values are stored below so the fallback costs nothing to build;
``tests/sim/costmodel/test_costmodel_roofline.py`` re-fits them and checks they still hold.

The roofline has no kernel-launch floor, so it is optimistic for tiny calls (a decode step's
attention of a few short sequences); the profiled model's per-iteration attention constant is
not part of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from placement.domain.accelerators import CATALOGUE, Accelerator
from placement.domain.llm import ModelArchitecture, get_model
from placement.errors import ProfileUnavailable
from sim.costmodel.base import IterationCostModel
from sim.costmodel.interpolate import FloatArray
from sim.costmodel.operators import ShardShapes, lm_head_rows, shard_shapes
from sim.costmodel.profiled import (
    FRAMEWORK_OVERHEAD_S,
    MAX_DECODE_SEQS,
    MAX_TOKENS,
    ProfiledCostModel,
)
from sim.costmodel.profiles import OperatorProfile
from sim.costmodel.stack import StackCalibration
from sim.costmodel.tabulated import TabulatedCostModel
from sim.costmodel.transfer import TransferModel, default_transfer, synthetic_profile


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineEfficiency:
    """Fractions of datasheet peak compute and bandwidth that operators reach."""

    compute: float
    memory: float


# Fitted with fit_efficiency(profiled_samples()) — see the module docstring.
FITTED_EFFICIENCY = RooflineEfficiency(compute=0.45, memory=0.72)


@dataclass(frozen=True, slots=True, kw_only=True)
class Work:
    """FLOPs and bytes of a set of operators, one row per operator (``time = Σ max(...)``)."""

    flops: FloatArray
    hbm_bytes: FloatArray
    link_bytes: FloatArray


@dataclass(frozen=True, slots=True)
class Peaks:
    """Datasheet peaks of one accelerator, in FLOP/s and bytes/s."""

    flops_per_s: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float


def peaks_of(accelerator: Accelerator) -> Peaks:
    """Dense BF16 peak, HBM bandwidth and per-GPU interconnect bandwidth from the catalogue."""
    return Peaks(
        flops_per_s=accelerator.dense_bf16_tflops * 1e12,
        hbm_bytes_per_s=accelerator.hbm_tbps * 1e12,
        link_bytes_per_s=accelerator.interconnect_gbps * 1e9,
    )


def _gemm_work(m: FloatArray, n: int, k: int, dtype_bytes: int) -> tuple[FloatArray, FloatArray]:
    return 2.0 * m * n * k, dtype_bytes * (m * k + float(k) * n + m * n)


def linear_work(shapes: ShardShapes, m: FloatArray) -> list[Work]:
    """Per-operator work of ``linear_s`` for every token count in ``m`` (whole model)."""
    model, layers, b = shapes.model, float(shapes.layers), float(shapes.model.dtype_bytes)
    zero = np.zeros_like(m)
    works: list[Work] = []
    for gemm in shapes.layer_gemms:
        flops, hbm = _gemm_work(m, gemm.n, gemm.k, int(b))
        works.append(
            Work(
                flops=layers * gemm.count * flops,
                hbm_bytes=layers * gemm.count * hbm,
                link_bytes=zero,
            )
        )
    if shapes.moe is not None:
        moe = shapes.moe
        inter = moe.inter / moe.tp
        # expected distinct experts hit by m tokens routed to topk of num_experts each
        touched = moe.num_experts * (1.0 - (1.0 - moe.topk / moe.num_experts) ** m)
        flops = 2.0 * m * moe.topk * 3.0 * moe.hidden * inter
        hbm = b * (touched * 3.0 * moe.hidden * inter + 2.0 * m * moe.topk * moe.hidden)
        works.append(Work(flops=layers * flops, hbm_bytes=layers * hbm, link_bytes=zero))
    if shapes.all_reduces_per_layer:
        ring = 2.0 * (shapes.tp - 1) / shapes.tp
        link = layers * shapes.all_reduces_per_layer * ring * shapes.all_reduce_bytes(m)
        works.append(Work(flops=zero, hbm_bytes=zero, link_bytes=link))
    flops, hbm = _gemm_work(lm_head_rows(m), shapes.lm_head.n, shapes.lm_head.k, model.dtype_bytes)
    works.append(Work(flops=flops, hbm_bytes=hbm, link_bytes=zero))
    return works


def prefill_attention_work(shapes: ShardShapes, chunk: FloatArray, context: FloatArray) -> Work:
    """Causal attention of chunks over cached context, all layers."""
    b, hd, layers = shapes.model.dtype_bytes, shapes.head_dim, shapes.layers
    pairs = chunk * (context + chunk / 2.0)
    flops = layers * 4.0 * pairs * shapes.heads * hd
    hbm = layers * b * hd * (2.0 * chunk * shapes.heads + 2.0 * (context + chunk) * shapes.kv_heads)
    return Work(flops=flops, hbm_bytes=hbm, link_bytes=np.zeros_like(flops))


def decode_attention_slope_work(shapes: ShardShapes) -> Work:
    """Work per summed context token of decode attention, all layers (a one-row Work)."""
    hd, layers = shapes.head_dim, shapes.layers
    flops = np.asarray([layers * 4.0 * shapes.heads * hd])
    hbm = np.asarray([layers * 2.0 * shapes.kv_heads * hd * shapes.model.dtype_bytes])
    return Work(flops=flops, hbm_bytes=hbm, link_bytes=np.zeros(1))


def roofline_s(works: Sequence[Work], peaks: Peaks, efficiency: RooflineEfficiency) -> FloatArray:
    """Σ over operators of max(compute time, HBM time, link time) at the given efficiencies."""
    total = np.zeros_like(works[0].flops)
    for w in works:
        compute = w.flops / (peaks.flops_per_s * efficiency.compute)
        memory = w.hbm_bytes / (peaks.hbm_bytes_per_s * efficiency.memory)
        link = w.link_bytes / (peaks.link_bytes_per_s * efficiency.memory)
        total += np.maximum(np.maximum(compute, memory), link)
    return total


def profile_predicted(model: ProfiledCostModel) -> tuple[str, ...]:
    return model.profile_predicted


class RooflineCostModel(TabulatedCostModel):
    """:class:`~sim.costmodel.base.IterationCostModel` from datasheet figures and a roofline.

    ``reason`` says why this model is used instead of the profiled one. ``efficiency=None``:
    learned utilization surfaces (``transfer``, default the shipped ones); an explicit
    efficiency: the constant-efficiency roofline. ``measured``: the accelerator's own tables,
    kept wherever they cover the model (``predicted`` lists what came from the datasheet).
    """

    def __init__(
        self,
        accelerator: Accelerator,
        model: ModelArchitecture,
        tp: int,
        *,
        reason: str = "requested",
        efficiency: RooflineEfficiency | None = None,
        transfer: TransferModel | None = None,
        measured: OperatorProfile | None = None,
        stack: StackCalibration | None = None,
        calibrated_on: str = "",
        framework_overhead_s: float = FRAMEWORK_OVERHEAD_S,
        max_tokens: int = MAX_TOKENS,
        max_decode_seqs: int = MAX_DECODE_SEQS,
    ) -> None:
        shapes = shard_shapes(model, tp)
        peaks = peaks_of(accelerator)
        self.accelerator = accelerator
        self.model = model
        self.tp = tp
        self.reason = reason
        self.efficiency = efficiency
        self.framework_overhead_s = framework_overhead_s
        self.overhead_s = framework_overhead_s
        self._per_pair: float | None = None
        self._per_token = 0.0
        self._per_chunk = 0.0
        self.stack = stack
        self.calibrated_on = ""
        self.predicted: tuple[str, ...] = ("every operator",)
        if efficiency is None:
            self.transfer = transfer if transfer is not None else default_transfer()
            tables = ProfiledCostModel(
                accelerator,
                model,
                tp,
                profile=synthetic_profile(accelerator, model, tp, self.transfer, measured),
                stack=stack,
                calibrated_on=calibrated_on,
                framework_overhead_s=framework_overhead_s,
                max_tokens=max_tokens,
                max_decode_seqs=max_decode_seqs,
            )
            self._linear = tables._linear
            self._max_tokens = tables._max_tokens
            self._decode = tables._decode
            self._max_seqs = tables._max_seqs
            self._per_token = tables._per_token
            self._per_pair = tables._per_pair
            self._per_chunk = tables._per_chunk
            self.prefill_fit = tables.prefill_fit
            self.decode_fit = tables.decode_fit
            self.overhead_s = tables.overhead_s
            self.framework_overhead_s = tables.framework_overhead_s
            self.calibrated_on = tables.calibrated_on
            self.predicted = profile_predicted(tables)
            return
        if stack is not None:
            raise ValueError("a stack calibration applies to the learned surfaces only")

        tokens = np.arange(1, max_tokens + 1, dtype=np.float64)
        linear = roofline_s(linear_work(shapes, tokens), peaks, efficiency)
        self._linear: list[float] = [0.0, *linear.tolist()]
        self._max_tokens = max_tokens

        slope = float(roofline_s([decode_attention_slope_work(shapes)], peaks, efficiency)[0])
        # per sequence: read its query and write its output once per layer
        per_seq = shapes.layers * 2.0 * shapes.heads * shapes.head_dim * model.dtype_bytes
        per_seq_s = per_seq / (peaks.hbm_bytes_per_s * efficiency.memory)
        self._decode: list[tuple[float, float]] = [
            (n * per_seq_s, slope if n else 0.0) for n in range(max_decode_seqs + 1)
        ]
        self._max_seqs = max_decode_seqs

        layers, hd, b = shapes.layers, shapes.head_dim, model.dtype_bytes
        self._pair_flop_s = (
            layers * 4.0 * shapes.heads * hd / (peaks.flops_per_s * efficiency.compute)
        )
        bw = peaks.hbm_bytes_per_s * efficiency.memory
        self._q_byte_s = layers * b * hd * 2.0 * shapes.heads / bw
        self._kv_byte_s = layers * b * hd * 2.0 * shapes.kv_heads / bw

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Causal attention of one chunk over its cached context, all layers (s)."""
        if self._per_pair is not None:  # learned surfaces: the profiled model's form
            return (
                chunk_tokens
                * (self._per_token + self._per_pair * (context_tokens + 0.5 * chunk_tokens))
                + self._per_chunk
            )
        compute = self._pair_flop_s * chunk_tokens * (context_tokens + 0.5 * chunk_tokens)
        memory = self._q_byte_s * chunk_tokens + self._kv_byte_s * (context_tokens + chunk_tokens)
        return compute if compute > memory else memory


# ---------------------------------------------------------------------------------------------
# Fitting the efficiencies against the profiled model


@dataclass(frozen=True, slots=True, kw_only=True)
class FitSample:
    """Work of one quantity and the profiled model's time for it (s)."""

    label: str
    works: tuple[Work, ...]
    peaks: Peaks
    profiled_s: float


FIT_MODELS: tuple[tuple[str, int], ...] = (
    ("llama-3-8b", 1),
    ("qwen2.5-32b", 2),
    ("llama-2-70b", 4),
    ("mixtral-8x7b", 2),
)
FIT_TOKENS = (1, 16, 64, 256, 1024, 4096, 16384)
FIT_CHUNKS = (512, 2048, 8192)
EFFICIENCY_GRID = np.round(np.arange(0.05, 1.0001, 0.01), 2)


def _index(works: Sequence[Work], i: int) -> tuple[Work, ...]:
    return tuple(
        Work(
            flops=w.flops[i : i + 1],
            hbm_bytes=w.hbm_bytes[i : i + 1],
            link_bytes=w.link_bytes[i : i + 1],
        )
        for w in works
    )


def samples_for(
    accelerator: Accelerator, model: ModelArchitecture, tp: int, profiled: IterationCostModel
) -> list[FitSample]:
    """Fit samples comparing roofline work with a profiled model of the same replica kind."""
    shapes, peaks = shard_shapes(model, tp), peaks_of(accelerator)
    out: list[FitSample] = []
    tokens = np.asarray(FIT_TOKENS, dtype=np.float64)
    works = linear_work(shapes, tokens)
    for i, m in enumerate(FIT_TOKENS):
        out.append(
            FitSample(
                label=f"linear m={m}",
                works=_index(works, i),
                peaks=peaks,
                profiled_s=profiled.linear_s(m),
            )
        )
    chunks = np.asarray(FIT_CHUNKS, dtype=np.float64)
    attention = prefill_attention_work(shapes, chunks, np.zeros_like(chunks))
    for i, c in enumerate(FIT_CHUNKS):
        out.append(
            FitSample(
                label=f"prefill c={c}",
                works=_index([attention], i),
                peaks=peaks,
                profiled_s=profiled.prefill_attention_s(c, 0),
            )
        )
    n = 64
    out.append(
        FitSample(
            label=f"decode slope n={n}",
            works=(decode_attention_slope_work(shapes),),
            peaks=peaks,
            profiled_s=profiled.decode_attention_coeffs(n)[1],
        )
    )
    return out


def profiled_samples(accelerators: Iterable[Accelerator] | None = None) -> list[FitSample]:
    """Fit samples over :data:`FIT_MODELS` on every profiled accelerator whose tables fit."""
    chosen = [a for a in (accelerators or CATALOGUE.values()) if a.profile is not None]
    samples: list[FitSample] = []
    for accelerator in chosen:
        for name, tp in FIT_MODELS:
            model = get_model(name)
            try:
                profiled = ProfiledCostModel(accelerator, model, tp, framework_overhead_s=0.0)
            except ProfileUnavailable:
                continue
            samples.extend(samples_for(accelerator, model, tp, profiled))
    return samples


def fit_efficiency(samples: Sequence[FitSample]) -> RooflineEfficiency:
    """Grid-search (compute, memory) minimising Σ log²(roofline / profiled) over ``samples``."""
    grid = EFFICIENCY_GRID
    ec, em = np.meshgrid(grid, grid, indexing="ij")
    loss = np.zeros_like(ec)
    for sample in samples:
        t = np.zeros_like(ec)
        for w in sample.works:
            compute = float(w.flops.sum()) / (sample.peaks.flops_per_s * ec)
            memory = float(w.hbm_bytes.sum()) / (sample.peaks.hbm_bytes_per_s * em)
            link = float(w.link_bytes.sum()) / (sample.peaks.link_bytes_per_s * em)
            t += np.maximum(np.maximum(compute, memory), link)
        loss += np.log(t / sample.profiled_s) ** 2
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return RooflineEfficiency(compute=float(grid[i]), memory=float(grid[j]))
