"""Validate the profiled cost model against request-level measurements of real engines.

Two sources, both read-only under the shared data folder:

- **Splitwise** (``profiles/splitwise/perf_model.csv``): Llama-2-70B on DGX-A100 / DGX-H100 at
  TP 2/4/8, measured with Splitwise's own serving stack. Per row (medians over repeats):
  ``prompt_time`` is predicted as one prefill iteration of ``batch_size`` chunks of
  ``prompt_size`` tokens with no cached context; ``token_time`` as the mean decode iteration over
  ``token_size`` steps of ``batch_size`` sequences at contexts ``prompt_size ..
  prompt_size + token_size - 1`` (exact in closed form: decode cost is affine in the context).
  Rows whose measured prompt time is below the datasheet compute bound (``2·params·tokens`` FLOPs
  at 100 % of peak on ``tp`` GPUs) cannot be full prefills and are excluded (two rows at batch
  64). The power-capped ``h100-80gb-pcap`` rows and BLOOM-176B are out of scope.
- **LLM-Inference-Bench** (``profiles/llm_inference_bench/All_results.csv``): vLLM rows on A100 and
  H100 whose model maps to a catalogue architecture (Llama-3-8B, Llama-2-70B, Mixtral-8x7B).
  ``Latency`` is the end-to-end time of a batch with input length = output length ``L``: predicted
  as the prefill of ``batch`` prompts, packed whole into iterations of at most
  ``DEFAULT_MAX_BATCHED_TOKENS`` tokens, then ``L - 1`` decode iterations of the whole batch.

The per-iteration host overhead is a property of the serving stack, not of the kernels, so each
source gets its own ``framework_overhead_s``, **calibrated on one half of that source and reported
on the other half only**:

- Splitwise: calibrated on the TP2 rows (per hardware: the DGX hosts differ), reported on TP4/TP8.
- LLM-Inference-Bench: calibrated on batch sizes ≤ 16, reported on batch sizes 32 and 64; this
  vLLM calibration (pooled over A100 and H100) is the simulator's default overhead
  (:data:`sim.costmodel.profiled.FRAMEWORK_OVERHEAD_S`).

Calibration minimises the squared relative error of ``base + overhead·iterations`` (closed form).
APE is ``|predicted / measured - 1|``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import DEFAULT_MAX_BATCHED_TOKENS
from placement.domain.llm import get_model
from placement.errors import InputError
from placement.paths import shared_data
from sim.costmodel.base import IterationCostModel
from sim.costmodel.profiled import ProfiledCostModel

SPLITWISE_CSV = Path("profiles") / "splitwise" / "perf_model.csv"
LLM_INFERENCE_BENCH_CSV = Path("profiles") / "llm_inference_bench" / "All_results.csv"

SPLITWISE_HARDWARE = {"a100-80gb": "A100-80G", "h100-80gb": "H100-SXM"}
SPLITWISE_MODELS = {"llama2-70b": "llama-2-70b"}
BENCH_HARDWARE = {"Nvidia A100 GPU": "A100-80G", "Nvidia H100 GPU": "H100-SXM"}
# Only names whose architecture is exactly a catalogue entry (Llama-3-70B differs in vocab).
BENCH_MODELS = {
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
}
BENCH_FRAMEWORK = "vLLM"
SPLITWISE_CALIBRATION_TP = 2
BENCH_CALIBRATION_MAX_BATCH = 16


class ValidationRow(TypedDict):
    """One line of the validation report (APE as a fraction, over held-out cases only)."""

    hardware: str
    model: str
    phase: str
    source: str
    median_ape: float
    p90_ape: float
    n: int
    calibration: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One measured quantity and the model's prediction of it, split into base and overhead.

    ``predicted(o) = base_s + o · iterations`` for a per-iteration framework overhead ``o``.
    """

    source: str
    hardware: str
    model: str
    tp: int
    phase: str
    batch: int
    measured_s: float
    base_s: float
    iterations: float
    calibration_half: bool

    def predicted_s(self, framework_overhead_s: float) -> float:
        return self.base_s + framework_overhead_s * self.iterations


def _read_csv(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read ({exc})", source=str(path)) from exc
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            "missing column(s) " + ", ".join(missing), source=str(path), field=missing[0]
        )
    return frame


@lru_cache(maxsize=64)
def _model_for(kind: str, model: str, tp: int) -> ProfiledCostModel:
    """The profiled model without framework overhead: each case adds its source's overhead."""
    return ProfiledCostModel(get_accelerator(kind), get_model(model), tp, framework_overhead_s=0.0)


def prefill_s(cm: IterationCostModel, batch: int, prompt: int) -> float:
    """One prefill iteration of ``batch`` prompts of ``prompt`` tokens (no cached context)."""
    return cm.iteration_s([(prompt, 0)] * batch, 0, 0)


def mean_decode_s(cm: IterationCostModel, batch: int, context: int, steps: int) -> float:
    """Mean decode iteration of ``batch`` sequences over ``steps`` steps from ``context``."""
    d0, d1 = cm.decode_attention_coeffs(batch)
    mean_context = batch * (context + (steps - 1) / 2.0)
    return cm.overhead_s + cm.linear_s(batch) + d0 + d1 * mean_context


def _compute_bound_s(kind: str, model: str, tp: int, tokens: int) -> float:
    """Lower bound on a prefill: dense FLOPs at 100 % of the datasheet peak of ``tp`` GPUs."""
    accelerator, arch = get_accelerator(kind), get_model(model)
    return 2.0 * arch.active_params * tokens / (tp * accelerator.dense_bf16_tflops * 1e12)


def splitwise_cases(path: Path | None = None) -> list[Case]:
    """Cases from the Splitwise table (medians over repeated runs)."""
    path = path or shared_data() / SPLITWISE_CSV
    keys = ["model", "hardware", "tensor_parallel", "batch_size", "prompt_size", "token_size"]
    frame = _read_csv(path, [*keys, "prompt_time", "token_time"])
    frame = frame[
        frame["model"].isin(SPLITWISE_MODELS) & frame["hardware"].isin(SPLITWISE_HARDWARE)
    ]
    grouped = frame.groupby(keys)[["prompt_time", "token_time"]].median().reset_index()
    cases: list[Case] = []
    columns = [grouped[c].tolist() for c in [*keys, "prompt_time", "token_time"]]
    for name, hardware, tp, batch, prompt, tokens, prompt_ms, token_ms in zip(
        *columns, strict=True
    ):
        kind, model = SPLITWISE_HARDWARE[hardware], SPLITWISE_MODELS[name]
        cm = _model_for(kind, model, tp)
        case = Case(
            source="splitwise",
            hardware=kind,
            model=model,
            tp=tp,
            phase="decode",
            batch=batch,
            measured_s=token_ms / 1e3,
            base_s=mean_decode_s(cm, batch, prompt, tokens),
            iterations=1.0,
            calibration_half=tp == SPLITWISE_CALIBRATION_TP,
        )
        cases.append(case)
        prompt_s = prompt_ms / 1e3
        if prompt_s >= _compute_bound_s(kind, model, tp, batch * prompt):
            base_s = prefill_s(cm, batch, prompt)
            cases.append(replace(case, phase="prefill", measured_s=prompt_s, base_s=base_s))
    return cases


def e2e_s(cm: IterationCostModel, batch: int, length: int) -> tuple[float, float]:
    """(time, iterations) of a batch with input = output = ``length`` tokens."""
    per_iteration = max(1, DEFAULT_MAX_BATCHED_TOKENS // length)
    total, iterations, left = 0.0, 0, batch
    while left > 0:
        now = min(per_iteration, left)
        total += prefill_s(cm, now, length)
        iterations += 1
        left -= now
    steps = length - 1
    if steps > 0:
        total += steps * mean_decode_s(cm, batch, length + 1, steps)
        iterations += steps
    return total, float(iterations)


def llm_inference_bench_cases(path: Path | None = None) -> list[Case]:
    """Cases from the vLLM rows of LLM-Inference-Bench on A100/H100 for catalogue models."""
    path = path or shared_data() / LLM_INFERENCE_BENCH_CSV
    keys = ["Hardware", "Num of Hardware", "Model", "Input Output Length", "Batch Size"]
    frame = _read_csv(path, [*keys, "Framework", "Latency"])
    frame = frame[
        (frame["Framework"] == BENCH_FRAMEWORK)
        & frame["Hardware"].isin(BENCH_HARDWARE)
        & frame["Model"].isin(BENCH_MODELS)
    ]
    grouped = frame.groupby(keys)["Latency"].median().reset_index()
    cases: list[Case] = []
    columns = [grouped[c].tolist() for c in [*keys, "Latency"]]
    for hardware, tp, name, length, batch, latency_s in zip(*columns, strict=True):
        kind, model = BENCH_HARDWARE[hardware], BENCH_MODELS[name]
        cm = _model_for(kind, model, tp)
        base, iterations = e2e_s(cm, batch, length)
        cases.append(
            Case(
                source="llm_inference_bench",
                hardware=kind,
                model=model,
                tp=tp,
                phase="e2e",
                batch=batch,
                measured_s=latency_s,
                base_s=base,
                iterations=iterations,
                calibration_half=batch <= BENCH_CALIBRATION_MAX_BATCH,
            )
        )
    return cases


def calibrate_framework_overhead(cases: Iterable[Case]) -> float:
    """Overhead per iteration (s, ≥ 0) minimising the squared relative error over ``cases``."""
    num = den = 0.0
    for case in cases:
        x = case.iterations / case.measured_s
        num += x * (1.0 - case.base_s / case.measured_s)
        den += x * x
    return max(0.0, num / den) if den > 0 else 0.0


def _ape(case: Case, overhead_s: float) -> float:
    return abs(case.predicted_s(overhead_s) / case.measured_s - 1.0)


def _rows(
    cases: list[Case], overhead_for: Callable[[Case], float], calibration: Callable[[Case], str]
) -> list[ValidationRow]:
    held_out = [c for c in cases if not c.calibration_half]
    groups: dict[tuple[str, str, str, str], list[Case]] = {}
    for case in held_out:
        groups.setdefault((case.hardware, case.model, case.phase, case.source), []).append(case)
    rows: list[ValidationRow] = []
    for (hardware, model, phase, source), group in sorted(groups.items()):
        apes = np.asarray([_ape(c, overhead_for(c)) for c in group])
        rows.append(
            ValidationRow(
                hardware=hardware,
                model=model,
                phase=phase,
                source=source,
                median_ape=float(np.median(apes)),
                p90_ape=float(np.quantile(apes, 0.9)),
                n=len(group),
                calibration=calibration(group[0]),
            )
        )
    return rows


def validation_rows() -> list[ValidationRow]:
    """Held-out accuracy rows for both sources (see the module docstring for the protocol)."""
    rows: list[ValidationRow] = []
    splitwise = splitwise_cases()
    per_hardware = {
        hw: calibrate_framework_overhead(
            c for c in splitwise if c.calibration_half and c.hardware == hw
        )
        for hw in {c.hardware for c in splitwise}
    }
    rows += _rows(
        splitwise,
        lambda c: per_hardware[c.hardware],
        lambda c: f"overhead {per_hardware[c.hardware] * 1e3:.1f} ms from TP2 rows",
    )
    bench = llm_inference_bench_cases()
    vllm_overhead = calibrate_framework_overhead(c for c in bench if c.calibration_half)
    rows += _rows(
        bench,
        lambda c: vllm_overhead,
        lambda c: f"overhead {vllm_overhead * 1e3:.1f} ms from batch<=16 rows",
    )
    return rows
