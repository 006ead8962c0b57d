"""End-to-end measurements the catalogue attaches to accelerators, and the calibrations they give.

An accelerator entry's ``measurements`` name files in LLM-Inference-Bench columns (``Hardware,
Num of Hardware, Framework, Model, Input Output Length, Batch Size, Latency``) or Splitwise
columns (``model, hardware, tensor_parallel, batch_size, prompt_size, token_size, prompt_time,
token_time``) and the hardware value of the accelerator's rows. :func:`measured_runs` reads them
(models resolved through the catalogue, aliases included; rows of models it does not know, or
with a TP that does not split the model or leaves no KV cache, are skipped) into one
:class:`Run` per measured quantity:

- LLM-Inference-Bench: ``e2e``, the latency of a batch with input = output = ``L`` tokens, as
  the engine ran it (:mod:`sim.costmodel.replay`: a continuous-batching engine's batch in KV
  waves, or llama-bench's one sequence); a measurement entry's ``hbm_gb`` is the memory of the
  GPUs its rows were measured on when it differs from the kind's (LLM-Inference-Bench's A100
  rows are A100-SXM4-40GB);
- Splitwise: ``prefill`` (one iteration of ``batch`` prompts; the runs that differ only in the
  output length are repeats and are pooled; prefills measured below the datasheet compute bound
  cannot be full prefills and are dropped) and ``decode`` (the mean iteration over the output).

Each (accelerator, serving stack) pair is **calibrated** on a subset of its runs and reported
on the others (:func:`is_calibration_run`):

- accelerators with operator profiles: LLM-Inference-Bench runs of batch ≤ 16 (32 and 64 are
  reported), Splitwise prompt sizes 128/512/2048/8192 (256/1024/4096 reported); the serving
  stack's seven parameters (:class:`~sim.costmodel.stack.StackCalibration`) are fitted;
- accelerators known only by their datasheet: a *handful* (:data:`HANDFUL`) of runs — of the
  smallest model at the corners of batch, length and GPU count, and one of the largest model
  at its largest batch (:func:`handful`) — fit host overhead, all-reduce latency, per-sequence
  time, each decoding sequence's time per weight FLOP and the compute, memory and attention
  factors of the datasheet kernels (:mod:`sim.costmodel.transfer`) — or nothing, when leaving
  each run of the handful out shows the fit does not help; everything else is reported.

The simulator's default cost model of an accelerator with measurements is its kernels under the
calibration of its stack (:func:`sim.costmodel.factory.cost_model_for`); the shipped calibrations
are ``data/catalogue/calibrations.yaml`` (written by ``placement bench cost-model
--update-catalogue``), others are fitted when first needed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from placement.domain.accelerators import Accelerator, Measurements
from placement.domain.catalogue_files import SHARED_PREFIX, shipped_folder
from placement.domain.llm import ModelArchitecture, get_model
from placement.errors import InputError, PlacementError
from placement.paths import shared_file
from sim.costmodel.kernels import kernel_cost_model
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import find_profile
from sim.costmodel.replay import (
    Run,
    is_llama_bench,
    kernel_tp,
    measured_kv_tokens,
    predictor,
)
from sim.costmodel.roofline import RooflineCostModel
from sim.costmodel.stack import (
    DEFAULT_FREE,
    STACK_PARAMETERS,
    StackCalibration,
    fit_stack_calibration,
    stack_sensitivities,
)

CALIBRATIONS_FILE = "calibrations.yaml"
DEFAULT_FRAMEWORK = "vLLM"
SPLITWISE_FRAMEWORK = "splitwise"
HANDFUL = 6
HANDFUL_LENGTH = 1024
LARGEST_MODEL_RATIO = 2.0
PROFILED_CALIBRATION_MAX_BATCH = 16
SPLITWISE_CALIBRATION_PROMPTS = (128, 512, 2048, 8192)
DATASHEET_FREE = (
    "host_overhead_s",
    "all_reduce_hop_latency_s",
    "compute_factor",
    "memory_factor",
    "attention_factor",
    "decode_sequence_s",
    "decode_flop_s",
)
# a handful of runs cannot pin every parameter down: keep the rest near the neutral stack
DATASHEET_SHRINK = 0.1
# the profiled accelerators' tables hold their GEMMs at decode batch sizes: no decode FLOP cost
PROFILED_FREE = tuple(name for name in STACK_PARAMETERS if name != "decode_flop_s")
MIN_KV_TOKENS = 4096

BENCH_COLUMNS = (
    "Hardware",
    "Num of Hardware",
    "Framework",
    "Model",
    "Input Output Length",
    "Batch Size",
    "Latency",
)
SPLITWISE_COLUMNS = (
    "model",
    "hardware",
    "tensor_parallel",
    "batch_size",
    "prompt_size",
    "token_size",
    "prompt_time",
    "token_time",
)


def measurement_path(file: str) -> Path:
    """The file a measurement entry names (``shared:<path>`` under the shared data folder)."""
    if file.startswith(SHARED_PREFIX):
        return shared_file(file[len(SHARED_PREFIX) :])
    path = Path(file)
    if not path.is_file():
        raise InputError("measurement file not found", source=file, field="measurements.file")
    return path


@lru_cache(maxsize=16)
def _csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read ({exc})", source=str(path)) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            "missing column(s) " + ", ".join(missing), source=str(path), field=missing[0]
        )
    return frame


def _model(name: str) -> ModelArchitecture | None:
    try:
        return get_model(name)
    except PlacementError:
        return None


def _servable(model: ModelArchitecture, tp: int, hbm_gb: float) -> bool:
    """Whether ``tp`` GPUs of ``hbm_gb`` each split the model and keep room for its KV."""
    if tp < 1 or model.heads % tp:
        return False
    return measured_kv_tokens(model, tp, hbm_gb) >= MIN_KV_TOKENS


def _bench_runs(accelerator: Accelerator, m: Measurements) -> list[Run]:
    frame = _csv(measurement_path(m.file), BENCH_COLUMNS)
    rows = frame[frame["Hardware"] == m.hardware]
    if m.framework is not None:
        rows = rows[rows["Framework"] == m.framework]
    keys = ["Framework", "Model", "Num of Hardware", "Input Output Length", "Batch Size"]
    grouped = rows.groupby(keys)["Latency"].median().reset_index()
    hbm_gb = m.hbm_gb or accelerator.hbm_gb
    runs: list[Run] = []
    for framework, name, tp, length, batch, latency in grouped.itertuples(index=False):
        model = _model(str(name))
        if model is None or not _servable(model, int(tp), hbm_gb) or latency <= 0:
            continue
        runs.append(
            Run(
                source="llm_inference_bench",
                hardware=accelerator.kind,
                framework=str(framework),
                model=model.name,
                tp=int(tp),
                phase="e2e",
                batch=int(batch),
                prompt=int(length),
                tokens=int(length),
                measured_s=float(latency),
                hbm_gb=hbm_gb,
            )
        )
    return runs


def _compute_bound_s(
    accelerator: Accelerator, model: ModelArchitecture, tp: int, tokens: int
) -> float:
    """Lower bound on a prefill: dense FLOPs at 100 % of the datasheet peak of ``tp`` GPUs."""
    return 2.0 * model.active_params * tokens / (tp * accelerator.dense_bf16_tflops * 1e12)


def _splitwise_runs(accelerator: Accelerator, m: Measurements) -> list[Run]:
    frame = _csv(measurement_path(m.file), SPLITWISE_COLUMNS)
    rows = frame[frame["hardware"] == m.hardware]
    prefill_keys = ["model", "tensor_parallel", "batch_size", "prompt_size"]
    runs: list[Run] = []
    decode = rows.groupby([*prefill_keys, "token_size"])["token_time"].median().reset_index()
    for name, tp, batch, prompt, tokens, token_ms in decode.itertuples(index=False):
        model = _model(str(name))
        if model is None or not _servable(model, int(tp), accelerator.hbm_gb):
            continue
        runs.append(
            Run(
                source="splitwise",
                hardware=accelerator.kind,
                framework=SPLITWISE_FRAMEWORK,
                model=model.name,
                tp=int(tp),
                phase="decode",
                batch=int(batch),
                prompt=int(prompt),
                tokens=int(tokens),
                measured_s=float(token_ms) / 1e3,
            )
        )
    prefill = rows.groupby(prefill_keys)["prompt_time"].median().reset_index()
    for name, tp, batch, prompt, prompt_ms in prefill.itertuples(index=False):
        model = _model(str(name))
        if model is None or not _servable(model, int(tp), accelerator.hbm_gb):
            continue
        bound = _compute_bound_s(accelerator, model, int(tp), int(batch) * int(prompt))
        if prompt_ms / 1e3 < bound:
            continue
        runs.append(
            Run(
                source="splitwise",
                hardware=accelerator.kind,
                framework=SPLITWISE_FRAMEWORK,
                model=model.name,
                tp=int(tp),
                phase="prefill",
                batch=int(batch),
                prompt=int(prompt),
                tokens=0,
                measured_s=float(prompt_ms) / 1e3,
            )
        )
    return runs


def measured_runs(accelerator: Accelerator) -> list[Run]:
    """Every run the accelerator's measurement files hold for catalogue models."""
    runs: list[Run] = []
    for m in accelerator.measurements:
        if m.columns == "llm_inference_bench":
            runs += _bench_runs(accelerator, m)
        else:
            runs += _splitwise_runs(accelerator, m)
    return runs


def has_profile(accelerator: Accelerator) -> bool:
    return accelerator.profile is not None and find_profile(accelerator.profile) is not None


# ---------------------------------------------------------------------------------------------
# Predictions


def run_kv_tokens(accelerator: Accelerator, run: Run) -> int | None:
    """Tokens of KV cache the replica a run was measured on held (None: the run's sequence
    fits whatever the cache, as llama-bench sizes its context to the one sequence)."""
    if is_llama_bench(run):
        return None
    return measured_kv_tokens(
        get_model(run.model), run.tp, run.hbm_gb or accelerator.hbm_gb, run.framework
    )


# ---------------------------------------------------------------------------------------------
# Kernels, calibration subsets and fits


@lru_cache(maxsize=128)
def kernel_model(
    accelerator: Accelerator, model: ModelArchitecture, tp: int
) -> ProfiledCostModel | RooflineCostModel:
    """Kernel times (no stack): the measured tables when they cover the model, else the
    datasheet transfer (the same choice as :func:`sim.costmodel.factory.cost_model_for`)."""
    return kernel_cost_model(accelerator, model, tp)


def handful(runs: Sequence[Run]) -> set[Run]:
    """At most :data:`HANDFUL` runs: of the smallest model, at the corners of the axes the stack
    has parameters for, and one of the largest model.

    Smallest model, measured on several GPU counts: on the fewest, batch 1 at
    :data:`HANDFUL_LENGTH`, the largest batch at the shortest length and about a quarter of the
    largest batch at :data:`HANDFUL_LENGTH`; on the most, batch 1 at :data:`HANDFUL_LENGTH` and
    the largest batch at the shortest length — so the fit sees host overhead, weight and KV
    reads, per-sequence costs *and* what more GPUs cost per iteration (a handful on one GPU count
    cannot tell the all-reduce latency apart, and over-predicted Gaudi2's TP8 runs 2×). Measured
    on one GPU count only: the largest batch at the shortest length, and at
    :data:`HANDFUL_LENGTH` batch 1, the largest batch and one about a quarter of it. Batch 1 is
    not taken at the shortest length: it runs the fewest steps, so a fixed cost of the run (a
    first run's warm-up) weighs most there (MI300X vLLM Llama-2-7B: 16.8 ms a step at 128
    tokens, 8.6–11 ms at 256–2048).

    Largest model (:func:`_largest`): the largest batch at the shortest length on its fewest GPUs,
    so the fit sees what each sequence costs where a GPU holds the most parameters (the smallest
    model's runs cannot tell a per-sequence host time from a per-parameter one)."""
    e2e = sorted((r for r in runs if r.phase == "e2e"), key=_order)
    if not e2e:
        return set(sorted(runs, key=_order)[:HANDFUL])
    model = min(
        {r.model for r in e2e},
        key=lambda m: (min(r.tp for r in e2e if r.model == m), get_model(m).params, m),
    )
    mine = [r for r in e2e if r.model == model]
    tps = sorted({r.tp for r in mine})
    fewest = [r for r in mine if r.tp == tps[0]]
    picks = _corners(fewest, spread=len(tps) > 1)
    if len(tps) > 1:
        most = [r for r in mine if r.tp == tps[-1]]
        shortest, length = _lengths(most)
        picks += [
            *_at(most, length, first=True),
            *_at(most, shortest, first=False),
        ]
    chosen: list[Run] = []
    for r in [*picks[: HANDFUL - 1], *_largest(e2e, model), *picks[HANDFUL - 1 :]]:
        if r not in chosen:
            chosen.append(r)
    return set(chosen[:HANDFUL])


def _largest(runs: Sequence[Run], smallest: str) -> list[Run]:
    """The largest model's run at the largest batch and shortest length on its fewest GPUs; none
    when no model has :data:`LARGEST_MODEL_RATIO` times the smallest's parameters (one of about
    the same size tells the fit nothing about size)."""
    model = max({r.model for r in runs}, key=lambda m: (get_model(m).params, m))
    if get_model(model).params < LARGEST_MODEL_RATIO * get_model(smallest).params:
        return []
    mine = [r for r in runs if r.model == model]
    fewest = [r for r in mine if r.tp == min(r.tp for r in mine)]
    return _at(fewest, _lengths(fewest)[0], first=False)


def _lengths(runs: Sequence[Run]) -> tuple[int, int]:
    """The shortest length measured and :data:`HANDFUL_LENGTH` (else the longest)."""
    lengths = {r.prompt for r in runs}
    return min(lengths), HANDFUL_LENGTH if HANDFUL_LENGTH in lengths else max(lengths)


def _at(runs: Sequence[Run], length: int, *, first: bool) -> list[Run]:
    """The run of the smallest (``first``) or largest batch at ``length``."""
    at = sorted((r for r in runs if r.prompt == length), key=lambda r: r.batch)
    return [at[0] if first else at[-1]] if at else []


def _quarter(runs: Sequence[Run], length: int) -> list[Run]:
    """A run at ``length`` with about a quarter of the largest batch there (not an end)."""
    at = sorted((r for r in runs if r.prompt == length), key=lambda r: r.batch)
    if len(at) <= 2:
        return []
    quarter = at[-1].batch / 4
    return [min(at[1:-1], key=lambda r: abs(r.batch - quarter))]


def _corners(runs: Sequence[Run], *, spread: bool) -> list[Run]:
    shortest, length = _lengths(runs)
    if spread:
        return [
            *_at(runs, length, first=True),
            *_at(runs, shortest, first=False),
            *_quarter(runs, length),
        ]
    return [
        *_at(runs, shortest, first=False),
        *_at(runs, length, first=True),
        *_at(runs, length, first=False),
        *_quarter(runs, length),
    ]


def calibration_runs(accelerator: Accelerator, runs: Sequence[Run]) -> set[Run]:
    """The runs a stack of ``accelerator`` is calibrated on (the rest are reported)."""
    if not has_profile(accelerator):
        return handful(runs)
    return {
        r
        for r in runs
        if (r.source == "splitwise" and r.prompt in SPLITWISE_CALIBRATION_PROMPTS)
        or (r.source != "splitwise" and r.batch <= PROFILED_CALIBRATION_MAX_BATCH)
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A run and its prediction under any stack: ``base_s + terms · stack.offsets()``."""

    run: Run
    base_s: float
    terms: tuple[float, ...]

    def predicted_s(self, stack: StackCalibration) -> float:
        return self.base_s + float(np.dot(self.terms, stack.offsets()))


def case_of(accelerator: Accelerator, run: Run) -> Case:
    base = kernel_model(accelerator, get_model(run.model), kernel_tp(run))
    base_s, terms = stack_sensitivities(base, predictor(run, run_kv_tokens(accelerator, run)))
    return Case(run=run, base_s=base_s, terms=terms)


def fit_calibration(
    cases: Sequence[Case], free: Sequence[str] = DEFAULT_FREE, shrink: float = 0.0
) -> StackCalibration:
    return fit_stack_calibration(
        [c.run.measured_s for c in cases],
        [c.base_s for c in cases],
        [c.terms for c in cases],
        free=free,
        shrink=shrink,
    )


def free_parameters(accelerator: Accelerator) -> tuple[str, ...]:
    return PROFILED_FREE if has_profile(accelerator) else DATASHEET_FREE


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A serving stack on one accelerator, fitted on ``n`` of its runs."""

    accelerator: str
    framework: str
    stack: StackCalibration
    n: int
    fitted_on: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "fitted_on": self.fitted_on,
            **{k: float(f"{v:.6g}") for k, v in self.stack.as_dict().items()},
        }


def calibrate(accelerator: Accelerator, framework: str) -> Calibration | None:
    """The stack ``framework`` on ``accelerator`` from its calibration runs (None: no runs)."""
    runs = [r for r in measured_runs(accelerator) if r.framework == framework]
    chosen = sorted(calibration_runs(accelerator, runs), key=_order)
    free = free_parameters(accelerator)
    if len(chosen) < (len(free) if has_profile(accelerator) else 1):
        return None
    cases = [case_of(accelerator, r) for r in chosen]
    models = sorted({f"{r.model} TP{r.tp}" for r in chosen})
    if has_profile(accelerator):
        stack, what = fit_calibration(cases, free), "calibration subset"
    else:
        stack, what = fit_handful(cases, free)
    return Calibration(
        accelerator=accelerator.kind,
        framework=framework,
        stack=stack,
        n=len(chosen),
        fitted_on=f"{what}: {len(chosen)} runs of {', '.join(models)}",
    )


SHARED = "shared"


def calibrate_shared(
    framework: str, accelerators: Sequence[Accelerator] | None = None
) -> Calibration | None:
    """One stack for every profiled accelerator: ``framework`` fitted on the pooled calibration
    runs of the profiled accelerators that measured it (each run on its own kernels)."""
    from placement.domain.accelerators import CATALOGUE

    pool = [a for a in (accelerators or list(CATALOGUE.values())) if a.measurements]
    cases: list[Case] = []
    names: list[str] = []
    for accelerator in pool:
        if not has_profile(accelerator):
            continue
        runs = [r for r in measured_runs(accelerator) if r.framework == framework]
        chosen = sorted(calibration_runs(accelerator, runs), key=_order)
        if chosen:
            names.append(f"{accelerator.kind} ({len(chosen)})")
            cases += [case_of(accelerator, r) for r in chosen]
    if len(cases) < len(PROFILED_FREE):
        return None
    return Calibration(
        accelerator=SHARED,
        framework=framework,
        stack=fit_calibration(cases, PROFILED_FREE),
        n=len(cases),
        fitted_on=f"calibration subset of every profiled accelerator: {', '.join(names)}",
    )


def fit_handful(cases: Sequence[Case], free: Sequence[str]) -> tuple[StackCalibration, str]:
    """A handful's stack, or none: leave each run of the handful out in turn, fit on the rest,
    predict it; when the datasheet kernels under the vLLM overhead alone predict the left-out
    runs better, fitting would only add noise and the neutral stack is kept."""
    from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S

    neutral = StackCalibration(host_overhead_s=FRAMEWORK_OVERHEAD_S)
    fitted, plain = [], []
    for i, case in enumerate(cases):
        rest = [c for j, c in enumerate(cases) if j != i]
        stack = fit_calibration(rest, free, DATASHEET_SHRINK) if rest else neutral
        fitted.append(abs(case.predicted_s(stack) / case.run.measured_s - 1.0))
        plain.append(abs(case.predicted_s(neutral) / case.run.measured_s - 1.0))
    if float(np.median(plain)) <= float(np.median(fitted)):
        return neutral, "handful (cross-validated: no fit kept)"
    return fit_calibration(cases, free, DATASHEET_SHRINK), "handful"


def _order(r: Run) -> tuple[Any, ...]:
    return (r.source, r.framework, r.model, r.tp, r.phase, r.batch, r.prompt, r.tokens)


def frameworks(accelerator: Accelerator) -> list[str]:
    """The serving stacks measured on ``accelerator``, the default first when measured."""
    names = sorted({r.framework for r in measured_runs(accelerator)})
    if DEFAULT_FRAMEWORK in names:
        names.remove(DEFAULT_FRAMEWORK)
        names.insert(0, DEFAULT_FRAMEWORK)
    return names


# ---------------------------------------------------------------------------------------------
# Shipped calibrations


def calibrations_path() -> Path:
    return shipped_folder() / CALIBRATIONS_FILE


@cache
def _shipped(path: Path) -> dict[str, dict[str, StackCalibration]]:
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        out: dict[str, dict[str, StackCalibration]] = {}
        for kind, stacks in raw.get("calibrations", {}).items():
            out[str(kind)] = {
                # a parameter added after the file was written reads as neutral
                str(fw): StackCalibration(
                    **{k: float(params[k]) for k in STACK_PARAMETERS if k in params}
                )
                for fw, params in stacks.items()
            }
        return out
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"cannot read calibrations ({exc})", source=str(path)) from None


def save_calibrations(
    calibrations: Sequence[Calibration],
    path: Path,
    *,
    command: str,
    keep: Collection[str] = (),
) -> None:
    """Write ``calibrations`` to ``path``; the entries of the accelerators in ``keep`` (e.g.
    :data:`SHARED`) stay as ``path`` already has them, where it has them."""
    doc: dict[str, Any] = {"calibrations": {}}
    for c in calibrations:
        doc["calibrations"].setdefault(c.accelerator, {})[c.framework] = c.to_dict()
    if keep and path.is_file():
        old = (yaml.safe_load(path.read_text()) or {}).get("calibrations", {})
        for key in keep:
            if key in old:
                doc["calibrations"][key] = old[key]
    header = (
        "# Serving-stack calibrations of the accelerators with end-to-end measurements\n"
        "# (sim/costmodel/measured.py): fitted on the calibration runs only.\n"
        f"# Written by: {command}\n"
    )
    path.write_text(header + yaml.safe_dump(doc, sort_keys=True, width=100))
    _shipped.cache_clear()


def _shipped_calibration(key: str, framework: str) -> Calibration | None:
    stack = _shipped(calibrations_path()).get(key, {}).get(framework)
    if stack is None:
        return None
    return Calibration(
        accelerator=key, framework=framework, stack=stack, n=0, fitted_on=CALIBRATIONS_FILE
    )


@lru_cache(maxsize=64)
def _shared_for(framework: str) -> Calibration | None:
    return _shipped_calibration(SHARED, framework) or calibrate_shared(framework)


@lru_cache(maxsize=64)
def calibration_for(accelerator: Accelerator, framework: str | None = None) -> Calibration | None:
    """The serving stack the default cost model of ``accelerator`` runs under.

    An accelerator known only by its datasheet, with end-to-end measurements of the stack: its
    own calibration (on a handful of runs; the first stack it measured when ``framework`` is
    None and it has no vLLM runs). Every other accelerator: the stack shared by the profiled
    accelerators (vLLM by default), so that a fleet mixing kinds runs one software stack. The
    shipped ``calibrations.yaml`` first, else fitted now; None when nobody measured the stack.
    """
    if not has_profile(accelerator) and accelerator.measurements:
        names = frameworks(accelerator)
        own = framework if framework is not None else (names[0] if names else None)
        if own is not None and own in names:
            return _shipped_calibration(accelerator.kind, own) or calibrate(accelerator, own)
    return _shared_for(framework if framework is not None else DEFAULT_FRAMEWORK)


# ---------------------------------------------------------------------------------------------
# The default view: what the simulator's default cost model predicts for held-out runs


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldOut:
    """One reported run: its APE under the default (calibrated) model and with no fit."""

    run: Run
    timing_source: str  # "profiles" or "end-to-end fit"
    ape: float
    ape_no_fit: float  # kernels + the vLLM framework overhead, nothing fitted


def held_out_runs(
    accelerators: Sequence[Accelerator], frameworks_kept: Sequence[str] | None = None
) -> tuple[list[HeldOut], list[Calibration]]:
    """Every run not in its stack's calibration subset, predicted by the default cost model
    (kernels under the stack fitted on calibration subsets only: the profiled accelerators'
    shared one, or a datasheet accelerator's own handful), with the calibrations."""
    from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S

    out: list[HeldOut] = []
    calibrations: list[Calibration] = []
    shared: dict[str, Calibration | None] = {}
    for accelerator in accelerators:
        if not accelerator.measurements:
            continue
        runs = measured_runs(accelerator)
        source = "profiles" if has_profile(accelerator) else "end-to-end fit"
        for framework in frameworks(accelerator):
            if frameworks_kept is not None and framework not in frameworks_kept:
                continue
            mine = [r for r in runs if r.framework == framework]
            if has_profile(accelerator):
                calibration = shared.get(framework) or calibrate_shared(framework, accelerators)
                shared[framework] = calibration
            else:
                calibration = calibrate(accelerator, framework)
            if calibration is None:
                continue
            if calibration not in calibrations:
                calibrations.append(calibration)
            chosen = calibration_runs(accelerator, mine)
            no_fit = StackCalibration(host_overhead_s=FRAMEWORK_OVERHEAD_S)
            for run in sorted(mine, key=_order):
                if run in chosen:
                    continue
                case = case_of(accelerator, run)
                out.append(
                    HeldOut(
                        run=run,
                        timing_source=source,
                        ape=abs(case.predicted_s(calibration.stack) / run.measured_s - 1.0),
                        ape_no_fit=abs(case.predicted_s(no_fit) / run.measured_s - 1.0),
                    )
                )
    return out, calibrations


def default_view_rows(
    held_out: Sequence[HeldOut], calibrations: Sequence[Calibration]
) -> list[dict[str, Any]]:
    """One row per (hardware, stack, model, phase, source) of held-out runs, marked
    ``default: true``, with the no-fit figure beside it."""
    fitted = {(c.accelerator, c.framework): c.fitted_on for c in calibrations}
    profiled = {h.run.hardware for h in held_out if h.timing_source == "profiles"}
    groups: dict[tuple[str, str, str, str, str], list[HeldOut]] = {}
    for h in held_out:
        r = h.run
        groups.setdefault((r.hardware, r.framework, r.model, r.phase, r.source), []).append(h)
    rows: list[dict[str, Any]] = []
    for (hardware, framework, model, phase, source), group in sorted(groups.items()):
        apes = np.asarray([h.ape for h in group])
        rows.append(
            {
                "view": "default: kernels + stack calibrated on held-in runs",
                "default": True,
                "hardware": hardware,
                "framework": framework,
                "model": model,
                "phase": phase,
                "source": source,
                "timing_source": group[0].timing_source,
                "median_ape": float(np.median(apes)),
                "p90_ape": float(np.quantile(apes, 0.9)),
                "n": len(group),
                "median_ape_no_fit": float(np.median([h.ape_no_fit for h in group])),
                "calibration": fitted[(SHARED if hardware in profiled else hardware, framework)],
            }
        )
    return rows
