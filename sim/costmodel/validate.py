"""Validate the profiled cost model against request-level measurements of real engines.

Two sources, both read-only under the shared data folder:

- **Splitwise** (``profiles/splitwise/perf_model.csv``): Llama-2-70B on DGX-A100 / DGX-H100 at
  TP 2/4/8, measured with Splitwise's own serving stack. Medians over repeated runs. A
  ``token_time`` case per (TP, batch, prompt, tokens) is predicted as the mean decode iteration over
  ``token_size`` steps of ``batch_size`` sequences at contexts ``prompt_size ..
  prompt_size + token_size - 1`` (exact in closed form: decode cost is affine in the context). A
  ``prompt_time`` case per (TP, batch, prompt) — the prefill does not depend on ``token_size``, so
  the runs that differ only in it are repeats of one prefill and are pooled — is predicted as one
  prefill iteration of ``batch_size`` chunks of ``prompt_size`` tokens with no cached context.
  Prefills measured below the datasheet compute bound (``2·params·tokens`` FLOPs at 100 % of peak
  on ``tp`` GPUs) cannot be full prefills and are excluded (batch 64 at TP2, on both GPUs). The
  power-capped ``h100-80gb-pcap`` rows and BLOOM-176B are out of scope.
- **LLM-Inference-Bench** (``profiles/llm_inference_bench/All_results.csv``): vLLM rows on A100 and
  H100 whose model maps to a catalogue architecture (Llama-3-8B, Llama-2-70B, Mixtral-8x7B).
  ``Latency`` is the end-to-end time of a batch with input length = output length ``L``: predicted
  as the prefill of ``batch`` prompts, packed whole into iterations of at most
  ``DEFAULT_MAX_BATCHED_TOKENS`` tokens, then ``L - 1`` decode iterations of the whole batch.

Every view reports APE = ``|predicted / measured - 1|`` only on rows that no parameter was fitted
on. The views (``view`` key of each row):

- ``stack, cross-hardware`` (headline, Splitwise): a :class:`~sim.costmodel.stack.StackCalibration`
  (host overhead, all-reduce hop latency, compute factor, per-sequence prefill cost) describes
  Splitwise's serving stack. The stack is the same software on both GPUs, so it is fitted on all
  rows of one GPU (both phases, TP 2/4/8) and reported on the other GPU: A100 → H100 and
  H100 → A100. The fitted parameters of both folds are returned with the rows.
- ``overhead, TP2→TP4/8`` (Splitwise): only a per-iteration overhead, fitted per GPU on the TP2
  rows, reported on TP4/TP8 (the all-reduce latency cannot be separated from the host overhead
  at a single TP).
- ``vLLM default, no fit`` (Splitwise): the simulator's default model as is, on all rows: the
  reference the calibrations must improve on.
- ``overhead, batch≤16→32/64`` (LLM-Inference-Bench): the per-iteration overhead fitted on batch
  sizes ≤ 16, reported on batch sizes 32 and 64; this vLLM calibration (pooled over A100 and H100)
  is the simulator's default overhead (:data:`sim.costmodel.profiled.FRAMEWORK_OVERHEAD_S`).

The overhead-only fits minimise the squared relative error of ``base + overhead·iterations``
(closed form).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import TypedDict

import numpy as np
import pandas as pd

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import DEFAULT_MAX_BATCHED_TOKENS
from placement.domain.llm import get_model
from placement.errors import InputError
from placement.paths import shared_file
from sim.costmodel.base import IterationCostModel
from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S, ProfiledCostModel
from sim.costmodel.replay import mean_decode_s, prefill_s
from sim.costmodel.stack import (
    StackCalibration,
    fit_stack_calibration,
    stack_sensitivities,
)

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

VIEW_STACK = "stack, cross-hardware"
VIEW_TP2 = "overhead, TP2→TP4/8"
VIEW_DEFAULT = "vLLM default, no fit"
VIEW_BENCH = "overhead, batch≤16→32/64"


class ValidationRow(TypedDict):
    """One line of the validation report (APE as a fraction, over held-out cases only)."""

    hardware: str
    model: str
    phase: str
    source: str
    median_ape: float
    p90_ape: float
    n: int
    view: str
    calibration: str


class StackFold(TypedDict):
    """One cross-hardware fold: the stack fitted on ``fitted_on``, reported on ``reported_on``.

    ``fit_median_ape`` is the in-sample accuracy per phase (on the fit rows), for comparison
    with the held-out rows only.
    """

    source: str
    fitted_on: str
    reported_on: str
    n_fit: int
    host_overhead_s: float
    all_reduce_hop_latency_s: float
    compute_factor: float
    prefill_sequence_s: float
    fit_median_ape: dict[str, float]


class ValidationReport(TypedDict):
    rows: list[ValidationRow]
    stack_calibrations: list[StackFold]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One measured quantity and the model's prediction of it.

    ``base_s`` is the prediction of the kernel tables alone (no host overhead). With a
    per-iteration overhead ``o`` the prediction is ``base_s + o · iterations``; under a serving
    stack ``s`` it is ``base_s + stack_terms · s.offsets()`` (exact: see
    :func:`sim.costmodel.stack.stack_sensitivities`).
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
    stack_terms: tuple[float, ...]
    calibration_half: bool

    def predicted_s(self, framework_overhead_s: float) -> float:
        return self.base_s + framework_overhead_s * self.iterations

    def stack_predicted_s(self, stack: StackCalibration) -> float:
        terms = self.stack_terms
        return self.base_s + float(np.dot(terms, stack.offsets()[: len(terms)]))


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


def _compute_bound_s(kind: str, model: str, tp: int, tokens: int) -> float:
    """Lower bound on a prefill: dense FLOPs at 100 % of the datasheet peak of ``tp`` GPUs."""
    accelerator, arch = get_accelerator(kind), get_model(model)
    return 2.0 * arch.active_params * tokens / (tp * accelerator.dense_bf16_tflops * 1e12)


def _case(
    cm: ProfiledCostModel,
    predict: Callable[[IterationCostModel], float],
    *,
    source: str,
    hardware: str,
    phase: str,
    batch: int,
    measured_s: float,
    iterations: float,
    calibration_half: bool,
) -> Case:
    base_s, terms = stack_sensitivities(cm, predict)
    return Case(
        source=source,
        hardware=hardware,
        model=cm.model.name,
        tp=cm.tp,
        phase=phase,
        batch=batch,
        measured_s=measured_s,
        base_s=base_s,
        iterations=iterations,
        stack_terms=terms,
        calibration_half=calibration_half,
    )


def splitwise_cases(path: Path | None = None) -> list[Case]:
    """Decode cases per (TP, batch, prompt, tokens), prefill cases per (TP, batch, prompt)."""
    path = path or shared_file(SPLITWISE_CSV)
    prefill_keys = ["model", "hardware", "tensor_parallel", "batch_size", "prompt_size"]
    decode_keys = [*prefill_keys, "token_size"]
    frame = _read_csv(path, [*decode_keys, "prompt_time", "token_time"])
    frame = frame[
        frame["model"].isin(SPLITWISE_MODELS) & frame["hardware"].isin(SPLITWISE_HARDWARE)
    ]
    cases: list[Case] = []
    decode = frame.groupby(decode_keys)["token_time"].median().reset_index()
    for name, hardware, tp, batch, prompt, tokens, token_ms in decode.itertuples(index=False):
        cm = _model_for(SPLITWISE_HARDWARE[hardware], SPLITWISE_MODELS[name], tp)
        cases.append(
            _case(
                cm,
                partial(mean_decode_s, batch=batch, context=prompt, steps=tokens),
                source="splitwise",
                hardware=cm.accelerator.kind,
                phase="decode",
                batch=batch,
                measured_s=token_ms / 1e3,
                iterations=1.0,
                calibration_half=tp == SPLITWISE_CALIBRATION_TP,
            )
        )
    prefill = frame.groupby(prefill_keys)["prompt_time"].median().reset_index()
    for name, hardware, tp, batch, prompt, prompt_ms in prefill.itertuples(index=False):
        kind, model = SPLITWISE_HARDWARE[hardware], SPLITWISE_MODELS[name]
        if prompt_ms / 1e3 < _compute_bound_s(kind, model, tp, batch * prompt):
            continue
        cases.append(
            _case(
                _model_for(kind, model, tp),
                partial(prefill_s, batch=batch, prompt=prompt),
                source="splitwise",
                hardware=kind,
                phase="prefill",
                batch=batch,
                measured_s=prompt_ms / 1e3,
                iterations=1.0,
                calibration_half=tp == SPLITWISE_CALIBRATION_TP,
            )
        )
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


def e2e_time_s(cm: IterationCostModel, batch: int, length: int) -> float:
    """Time of :func:`e2e_s` alone."""
    return e2e_s(cm, batch, length)[0]


def llm_inference_bench_cases(path: Path | None = None) -> list[Case]:
    """Cases from the vLLM rows of LLM-Inference-Bench on A100/H100 for catalogue models."""
    path = path or shared_file(LLM_INFERENCE_BENCH_CSV)
    keys = ["Hardware", "Num of Hardware", "Model", "Input Output Length", "Batch Size"]
    frame = _read_csv(path, [*keys, "Framework", "Latency"])
    frame = frame[
        (frame["Framework"] == BENCH_FRAMEWORK)
        & frame["Hardware"].isin(BENCH_HARDWARE)
        & frame["Model"].isin(BENCH_MODELS)
    ]
    grouped = frame.groupby(keys)["Latency"].median().reset_index()
    cases: list[Case] = []
    for hardware, tp, name, length, batch, latency_s in grouped.itertuples(index=False):
        cm = _model_for(BENCH_HARDWARE[hardware], BENCH_MODELS[name], tp)
        cases.append(
            _case(
                cm,
                partial(e2e_time_s, batch=batch, length=length),
                source="llm_inference_bench",
                hardware=cm.accelerator.kind,
                phase="e2e",
                batch=batch,
                measured_s=latency_s,
                iterations=e2e_s(cm, batch, length)[1],
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


def calibrate_stack(cases: Sequence[Case]) -> StackCalibration:
    """The serving stack that best explains ``cases`` (robust least squares on log-ratios)."""
    return fit_stack_calibration(
        [c.measured_s for c in cases], [c.base_s for c in cases], [c.stack_terms for c in cases]
    )


def _apes(cases: Sequence[Case], predict: Callable[[Case], float]) -> list[float]:
    return [abs(predict(c) / c.measured_s - 1.0) for c in cases]


def _rows(
    held_out: Sequence[Case], predict: Callable[[Case], float], view: str, calibration: str
) -> list[ValidationRow]:
    """One row per (hardware, model, phase, source) of ``held_out`` (no fitted case in it)."""
    groups: dict[tuple[str, str, str, str], list[Case]] = {}
    for case in held_out:
        groups.setdefault((case.hardware, case.model, case.phase, case.source), []).append(case)
    rows: list[ValidationRow] = []
    for (hardware, model, phase, source), group in sorted(groups.items()):
        apes = np.asarray(_apes(group, predict))
        rows.append(
            ValidationRow(
                hardware=hardware,
                model=model,
                phase=phase,
                source=source,
                median_ape=float(np.median(apes)),
                p90_ape=float(np.quantile(apes, 0.9)),
                n=len(group),
                view=view,
                calibration=calibration,
            )
        )
    return rows


def cross_hardware_folds(
    cases: Sequence[Case],
) -> list[tuple[StackFold, list[ValidationRow]]]:
    """Fit the stack on each GPU's cases and report it on every other GPU's cases."""
    hardware = sorted({c.hardware for c in cases})
    folds: list[tuple[StackFold, list[ValidationRow]]] = []
    for fit_hw in hardware:
        fit = [c for c in cases if c.hardware == fit_hw]
        stack = calibrate_stack(fit)

        def predict(case: Case, stack: StackCalibration = stack) -> float:
            return case.stack_predicted_s(stack)

        in_sample = {
            phase: float(np.median(_apes([c for c in fit if c.phase == phase], predict)))
            for phase in sorted({c.phase for c in fit})
        }
        for report_hw in (h for h in hardware if h != fit_hw):
            fold = StackFold(
                source=fit[0].source,
                fitted_on=fit_hw,
                reported_on=report_hw,
                n_fit=len(fit),
                host_overhead_s=stack.host_overhead_s,
                all_reduce_hop_latency_s=stack.all_reduce_hop_latency_s,
                compute_factor=stack.compute_factor,
                prefill_sequence_s=stack.prefill_sequence_s,
                fit_median_ape=in_sample,
            )
            held_out = [c for c in cases if c.hardware == report_hw]
            tps = "/".join(str(tp) for tp in sorted({c.tp for c in fit}))
            phases = "+".join(in_sample)
            calibration = f"stack fitted on {fit_hw} rows (n={len(fit)}, TP{tps}, {phases})"
            folds.append((fold, _rows(held_out, predict, VIEW_STACK, calibration)))
    return folds


def validation_report() -> ValidationReport:
    """Held-out accuracy rows of every view, and the fitted stacks (see the module docstring)."""
    splitwise = splitwise_cases()
    folds = cross_hardware_folds(splitwise)
    rows = [row for _, fold_rows in folds for row in fold_rows]
    for hw in sorted({c.hardware for c in splitwise}):
        mine = [c for c in splitwise if c.hardware == hw]
        overhead = calibrate_framework_overhead(c for c in mine if c.calibration_half)
        rows += _rows(
            [c for c in mine if not c.calibration_half],
            partial(Case.predicted_s, framework_overhead_s=overhead),
            VIEW_TP2,
            f"overhead {overhead * 1e3:.1f} ms from {hw} TP2 rows",
        )
    rows += _rows(
        splitwise,
        lambda c: c.predicted_s(FRAMEWORK_OVERHEAD_S),
        VIEW_DEFAULT,
        f"none (vLLM overhead {FRAMEWORK_OVERHEAD_S * 1e3:.1f} ms)",
    )
    bench = llm_inference_bench_cases()
    vllm_overhead = calibrate_framework_overhead(c for c in bench if c.calibration_half)
    rows += _rows(
        [c for c in bench if not c.calibration_half],
        lambda c: c.predicted_s(vllm_overhead),
        VIEW_BENCH,
        f"overhead {vllm_overhead * 1e3:.1f} ms from batch<=16 rows",
    )
    return ValidationReport(rows=rows, stack_calibrations=[fold for fold, _ in folds])


def validation_rows() -> list[ValidationRow]:
    """The rows of :func:`validation_report`."""
    return validation_report()["rows"]
