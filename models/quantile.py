"""LightGBM quantile regressors of TTFT and TPOT.

One booster per (target, quantile) trained on the pinball (quantile) loss. LightGBM's built-in
``objective="quantile"`` refuses ``monotone_constraints`` (it re-fits each leaf to a residual
quantile after the split, which can break monotonicity: LightGBM issue #3371), so the
objective is given as gradients: the built-in one's gradient (``1 − α`` where the score is
above the label, ``−α`` below) with an IRLS Hessian, ``(α or 1 − α) / max(|residual|,``
:data:`IRLS_MIN_RESIDUAL` ``)``, i.e. a Newton step of iteratively reweighted least squares for
quantile regression. With the built-in unit Hessian a leaf moves at most ``lr·α`` per tree;
the reweighted step moves in residual units, so 40 trees reach about the held-out pinball loss
that 400–800 unit-Hessian trees did, which is what keeps a 10k-row batch under 50 ms.
Boosting starts from the training target's α-quantile; early stopping watches LightGBM's own
``quantile`` metric.

The target is the log of the ratio to the roofline prior (:data:`LOG_RATIO`) or the log
latency (:data:`LOG_LATENCY`), the prior's log among the features either way; the prediction
is ``prior · exp(f)`` or ``exp(f)``. Quantiles survive the monotone ``log`` and the positive
factor, so either way the booster's α-quantile is the latency's. **The p50** of each latency is
fitted in both forms without monotone constraints and keeps the one with the lower mean APE on
the calibration rows (:func:`fit_target`); **the p95** is the log latency under the monotone
constraints (below), as before.

Why. Capacity at SLO is the one caller that relies on predictions never falling as load or
request size grows, and it now makes that guarantee itself along the path it sweeps
(:mod:`models.capacity`: the running maximum of the p95 over rising load, and no table cell
above the cells of smaller requests); the route path and the admission gate read the roofline
tables, not these boosters. On a validation slice carved from the training part of
``placement bench predictor-floor``'s telemetry (each run's first 70% of the training part
fits, the rest scores) the constraints cost the p50: TTFT MAPE 0.165 against 0.151 without
them (0.152 with only the three TTFT prior features free: constrained trees cannot undo the
prior where it rises faster than the latency), TPOT 0.148 against 0.144; unconstrained, the
ratio beats the log latency (TTFT 0.151 → 0.148, TPOT 0.144 → 0.133; at the 60% and 80% cuts
too), where under the constraints it had lost badly (0.39 / 0.91 against 0.30 / 0.22 on an
earlier telemetry). On the full training part the calibration rows pick the ratio for TTFT and
the log latency for TPOT. The p95 keeps the constraints and the log latency: unconstrained it
covered the low loads at 0.98 and the highest at 0.90 (validation), and its form moves
capacity at SLO, whose binding term it usually is.

:attr:`QuantileConfig.monotone` names the models that keep the constraints: +1 where latency
must not fall as a feature rises — every load feature (running, waiting, KV use, token rates),
the prior features, the prompt's input and uncached tokens for TTFT, input tokens for TPOT, the
expected output tokens in both, the router's counters in both — and −1 for how long the oldest
request ahead without a first token has waited (``backlog_oldest_wait_s``: the longer, the more
of the prefill ahead is done). A caller that does not know it passes 0.

Settings (:class:`QuantileConfig`) were checked on a validation slice carved from the training
part of `placement bench predictors`' telemetry (each run's first 60/70/80% fits, the rest of the
training part scores; the reported later 30% unseen). Learning rates of 0.05–0.2 (two to four
times the trees; prediction costs ~0.2–0.5 ms per tree for 10k rows), 15–63 leaves, 20–100
rows per leaf, L2 penalties of 1–40, LightGBM's ``advanced`` constraint method and recency
weights moved the validation TTFT/TPOT p50 MAPE (0.188 / 0.123) by at most 0.01. The best of
them (``advanced``, L2 20: 0.179 / 0.122) changed nothing on the held-out tail (TTFT 0.169,
TPOT 0.179 → 0.180) while leaving L40S out lost p95 coverage (TTFT 0.90 → 0.85, TPOT 0.85 →
0.77), so the defaults stay.

The upper quantile of TTFT gets one more shift per prompt-length bucket (:data:`PROMPT_EDGES`),
calibrated the same way on the same rows, never below 0 and never falling as prompts grow
(:func:`prompt_offsets`): with one global shift the p95 covered 0.88 of the held-out prompts of
16–32k tokens and 0.86 of those beyond (the rows overall: 0.95). On the validation slice the
same shift for TPOT over-covered long prompts (16–32k / 32k+: 0.963 / 0.989 → 0.985 / 1.0),
so TPOT keeps one shift.

The long buckets are thin in the calibration rows (~30 prompts of 16–32k tokens where the
held-out part has ~240), and the ⌈(n+1)·α⌉-th of 30 residuals is their largest: the TTFT p95 of
those prompts covered 0.97–1.0 of them on six independent traces (``PredictorBench(seed=1…6)``).
:attr:`QuantileConfig.prompt_shift_rows` ``"tail"`` calibrates the prompt shifts on the whole
tail (the stopping rows too: twice the rows; no booster trained on either). With it, and TPOT
given prompt shifts as well, the mean distance of the prompt, in-flight and load buckets' p95
coverage from 0.95 on those traces went 0.0200 → 0.0174 and the buckets outside 0.93–0.97 94 →
79; capacity at SLO against the engine did not move (15 shapes) or came closer (12k-token
prompts); but ``placement bench loop --workloads tiers`` lost 7% at load 1.25 (TTFT alone: 3.6%
at load 3), so the default stays (bench/RESULTS.md, "per-bucket p95 coverage on independent
traces").

:attr:`QuantileConfig.group_calibration` names the targets whose p95 also gets one factor per
decision-time group — prompt length, requests in flight at routing, expected output length,
accelerator — raked jointly on the tail (:mod:`models.group_calibration`; the predictor bundle
keeps the factors and applies them). Off by default (bench/RESULTS.md, "multi-group p95").

Training is deterministic (fixed seed, ``deterministic=True``, one thread) and time-ordered:
rows sorted by arrival, the last :attr:`QuantileConfig.tail_share` held out; the first half of
that tail stops boosting early, the second half calibrates a constant shift of the log
prediction so that a share α of its rows lies below it (split-conformal, with the
⌈(n+1)·α⌉/n finite-sample rank).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from models.features import (
    ARRIVAL_FEATURES,
    FEATURE_INDEX,
    FEATURES,
    LOAD_FEATURES,
    PRIOR_FEATURES,
    ROUTER_FEATURES,
    FeatureMatrix,
)
from models.roofline_prior import FloatArray
from placement.errors import InputError

if TYPE_CHECKING:
    import lightgbm as lgb

Target = Literal["ttft", "tpot"]
TARGETS: tuple[Target, ...] = ("ttft", "tpot")
TargetMode = Literal["log_ratio", "log_latency"]
LOG_RATIO: TargetMode = "log_ratio"
LOG_LATENCY: TargetMode = "log_latency"
QUANTILES = (0.5, 0.95)
# smallest residual (log units) the IRLS Hessian divides by: caps the step a row can ask for
IRLS_MIN_RESIDUAL = 0.05
# prompt-length buckets of the upper quantile's calibration: [0, 4k), [4k, 16k), [16k, 32k), 32k+
PROMPT_EDGES = (4096.0, 16384.0, 32768.0)
# fewer calibration rows than this in a bucket: it takes the shorter bucket's shift
MIN_PROMPT_CALIBRATION_ROWS = 20
# load features with no physical direction: a higher hit rate means less prefill, not more
_UNCONSTRAINED_LOAD = ("prefix_cache_hit_rate",)
# router features latency must not rise with: the longer the oldest prompt ahead has waited,
# the more of the prefill ahead is already done
_DECREASING_ROUTER = ("backlog_oldest_wait_s",)
_INCREASING_REQUEST: dict[Target, tuple[str, ...]] = {
    "ttft": ("input_tokens", "uncached_tokens", "output_tokens"),
    "tpot": ("input_tokens", "output_tokens"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantileConfig:
    """Boosting settings shared by the quantile models."""

    learning_rate: float = 0.3
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    lambda_l2: float = 1.0
    # models (model_name: "ttft_p95", …) whose boosters keep the per-feature monotone
    # constraints (see the module doc): not for a guarantee — capacity at SLO, the one caller
    # that relies on monotonicity, takes an envelope along the load path it sweeps
    # (models.capacity) — but for the upper quantiles' coverage across loads
    monotone: tuple[str, ...] = ("ttft_p95", "tpot_p95")
    # how LightGBM keeps the monotone constraints (each method guarantees them): "advanced"
    # bounds a leaf only by the leaves its split can reach, "intermediate" by more of them
    # (the validation slice preferred "advanced" for TTFT; the held-out tail did not: see below)
    monotone_method: str = "intermediate"
    # few trees: a 10k-row batch must predict in ≤ 50 ms (~0.6 ms per tree on this machine)
    max_rounds: int = 40
    early_stopping_rounds: int = 10
    tail_share: float = 0.2  # held-out tail: early stopping, then calibration
    calibrate: bool = True
    # targets whose upper quantile also gets a shift per prompt-length bucket (see the module doc)
    prompt_calibration: tuple[Target, ...] = ("ttft",)
    # the rows the prompt shifts are calibrated on: "calibrate" (the tail's calibration half) or
    # "tail" (its stopping half too: twice the rows in the thin long-prompt buckets; see above)
    prompt_shift_rows: Literal["calibrate", "tail"] = "calibrate"
    # the p50's candidate forms (log ratio to the prior, log latency): each latency's p50 keeps
    # the one with the lower mean APE on the calibration rows (see the module doc)
    modes: tuple[TargetMode, ...] = (LOG_RATIO, LOG_LATENCY)
    # the upper quantiles' form (None: their p50's); see the module doc
    upper_mode: TargetMode | None = LOG_LATENCY
    seed: int = 0
    num_threads: int = 1  # training: one thread, so that fits are bit-for-bit reproducible
    predict_threads: int = 2  # prediction is per row, identical for any thread count
    # features every booster trains without (their column held at 0, so no tree splits on
    # them and whatever a caller passes is ignored). The router's recent admission rate is
    # off by default: on six independent traces it took the TPOT p50 MAPE 0.1125 → 0.1064
    # (the shipped trace: 0.1003 → 0.1007), but capacity at SLO built on it cost
    # `bench loop --workloads tiers` 3.7–19.6% of its goodput at six of seven loads
    # (bench/RESULTS.md, "the router's recent admission rate"); () reads every feature
    ignored_features: tuple[str, ...] = ARRIVAL_FEATURES
    # targets whose upper quantile also gets one factor per decision-time group (prompt length,
    # requests in flight, expected output length, accelerator), raked jointly on the calibration
    # rows (models.group_calibration); off by default: bench/RESULTS.md, "multi-group p95"
    group_calibration: tuple[Target, ...] = ()
    # the rows the group factors are raked on: "calibrate" (the tail's calibration half) or
    # "tail" (its stopping half too: twice the rows per group)
    group_calibration_rows: Literal["calibrate", "tail"] = "tail"


def monotone_constraints(target: Target) -> list[int]:
    """+1 per feature where latency must not fall as it rises, −1 where it must not rise, 0
    elsewhere (FEATURES order)."""
    increasing = {f for f in LOAD_FEATURES if f not in _UNCONSTRAINED_LOAD}
    increasing |= set(ROUTER_FEATURES) | set(PRIOR_FEATURES) | set(_INCREASING_REQUEST[target])
    increasing |= set(ARRIVAL_FEATURES)
    increasing -= set(_DECREASING_ROUTER)
    return [1 if f in increasing else -1 if f in _DECREASING_ROUTER else 0 for f in FEATURES]


def prior_of(features: FeatureMatrix, target: Target) -> FloatArray:
    """The roofline prior of ``target`` for every row (s)."""
    return features.prior.ttft_s if target == "ttft" else features.prior.tpot_s


def pinball_objective(
    alpha: float,
) -> Callable[[FloatArray, lgb.Dataset], tuple[FloatArray, FloatArray]]:
    """Pinball-loss gradients at quantile ``alpha`` with the IRLS Hessian, for ``lgb.train``."""

    def gradients(score: FloatArray, data: lgb.Dataset) -> tuple[FloatArray, FloatArray]:
        label = np.asarray(data.get_label(), dtype=np.float64)
        above = score > label
        grad = np.where(above, 1.0 - alpha, -alpha)
        residual = np.maximum(np.abs(label - score), IRLS_MIN_RESIDUAL)
        hess = np.where(above, 1.0 - alpha, alpha) / residual
        weight = data.get_weight()  # a custom objective must apply row weights itself
        if weight is not None:
            w = np.asarray(weight, dtype=np.float64)
            return grad * w, hess * w
        return grad, hess

    return gradients


def training_values(features: FeatureMatrix, ignored: tuple[str, ...]) -> FloatArray:
    """The feature values boosters train on: ``ignored`` features' columns held at 0."""
    unknown = [name for name in ignored if name not in FEATURE_INDEX]
    if unknown:
        raise InputError(
            f"unknown feature {unknown[0]}",
            field="ignored_features",
            expected="names of models.features.FEATURES",
        )
    if not ignored:
        return features.values
    values = features.values.copy()
    values[:, [FEATURE_INDEX[name] for name in ignored]] = 0.0
    return values


def booster_params(config: QuantileConfig, monotone: list[int]) -> dict[str, Any]:
    """The LightGBM settings every booster here shares: size, regularisation, monotonicity,
    determinism. Callers add the objective."""
    return {
        "learning_rate": config.learning_rate,
        "num_leaves": config.num_leaves,
        "min_data_in_leaf": config.min_data_in_leaf,
        "lambda_l2": config.lambda_l2,
        "monotone_constraints": monotone,
        "monotone_constraints_method": config.monotone_method,
        "seed": config.seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": config.num_threads,
        "verbose": -1,
    }


def train_booster(
    params: dict[str, Any], train: lgb.Dataset, stop: lgb.Dataset, config: QuantileConfig
) -> lgb.Booster:
    """Boost until the time-ordered ``stop`` tail stops improving; keep only the best rounds."""
    import lightgbm as lgb

    booster = lgb.train(
        params,
        train,
        num_boost_round=config.max_rounds,
        valid_sets=[stop],
        valid_names=["stop"],
        callbacks=[lgb.early_stopping(config.early_stopping_rounds, verbose=False)],
    )
    if booster.best_iteration > 0:
        booster = lgb.Booster(
            model_str=booster.model_to_string(num_iteration=booster.best_iteration)
        )
    return booster


def _params(config: QuantileConfig, target: Target, alpha: float) -> dict[str, Any]:
    return {
        "objective": pinball_objective(alpha),
        "metric": "quantile",
        "alpha": alpha,
        **booster_params(config, constraints_of(config, target, alpha)),
    }


def model_name(target: Target, alpha: float) -> str:
    """A quantile model's name: ``ttft_p50``, ``tpot_p95``, …"""
    return f"{target}_p{round(alpha * 100)}"


def constraints_of(config: QuantileConfig, target: Target, alpha: float) -> list[int]:
    """The constraints the booster of ``target`` at quantile ``alpha`` trains with:
    :func:`monotone_constraints` if ``config.monotone`` names it, else none (all 0)."""
    if model_name(target, alpha) in config.monotone:
        return monotone_constraints(target)
    return [0] * len(FEATURES)


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantileModel:
    """A fitted booster for one target and quantile ``alpha``. Its log prediction is the
    booster's score + ``base`` (the starting score, the training target's α-quantile) +
    ``offset`` (the calibration shift)."""

    target: Target
    alpha: float
    mode: TargetMode
    booster: lgb.Booster
    base: float
    offset: float
    # extra log shift per prompt bucket (PROMPT_EDGES), never falling with prompt size; () none
    prompt_offsets: tuple[float, ...] = ()

    def predict(self, features: FeatureMatrix, *, num_threads: int = 1) -> FloatArray:
        """Predicted ``alpha``-quantile of the target for every row (s)."""
        if len(features.values) == 0:
            return np.empty(0)
        raw = np.asarray(
            self.booster.predict(features.values, num_threads=num_threads), dtype=np.float64
        )
        log_latency = raw + (self.base + self.offset)
        if self.prompt_offsets:
            bucket = prompt_bucket(features.column("input_tokens"))
            log_latency = log_latency + np.asarray(self.prompt_offsets)[bucket]
        if self.mode == LOG_RATIO:
            log_latency = log_latency + np.log(prior_of(features, self.target))
        return np.exp(log_latency)

    def to_text(self) -> str:
        """The booster as LightGBM's own model text."""
        return str(self.booster.model_to_string())

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        target: Target,
        alpha: float,
        mode: TargetMode,
        base: float,
        offset: float,
        prompt_offsets: tuple[float, ...] = (),
    ) -> QuantileModel:
        import lightgbm as lgb

        return cls(
            target=target,
            alpha=alpha,
            mode=mode,
            booster=lgb.Booster(model_str=text),
            base=base,
            offset=offset,
            prompt_offsets=prompt_offsets,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeSplit:
    """Row indices of the training head, the early-stopping part and the calibration part."""

    train: npt.NDArray[np.int64]
    stop: npt.NDArray[np.int64]
    calibrate: npt.NDArray[np.int64]


def time_split(order: npt.NDArray[np.int64], tail_share: float) -> TimeSplit:
    """Cut rows (``order``: indices sorted by arrival) into head / stopping / calibration tail."""
    n = len(order)
    n_tail = round(n * tail_share)
    if not 0.0 < tail_share < 1.0 or n_tail < 2 or n - n_tail < 2:
        raise InputError(
            f"{n} rows cannot be split into a training head and a {tail_share:.0%} tail",
            field="rows",
            expected="more rows (at least a few hundred) and 0 < tail_share < 1",
        )
    head = order[: n - n_tail]
    tail = order[n - n_tail :]
    half = len(tail) // 2
    return TimeSplit(train=head, stop=tail[:half], calibrate=tail[half:])


def _target_values(
    features: FeatureMatrix, latency: FloatArray, target: Target, mode: TargetMode
) -> FloatArray:
    log_latency = np.log(latency)
    if mode == LOG_RATIO:
        return log_latency - np.log(prior_of(features, target))
    return log_latency


def prompt_bucket(input_tokens: FloatArray) -> npt.NDArray[np.int64]:
    """Index of each prompt length's bucket: 0 below the first of :data:`PROMPT_EDGES`."""
    return np.searchsorted(np.asarray(PROMPT_EDGES), input_tokens, side="right").astype(np.int64)


def prompt_offsets(
    residual: FloatArray, input_tokens: FloatArray, alpha: float
) -> tuple[float, ...]:
    """Per prompt bucket, the split-conformal shift of ``residual`` (log observed − log predicted,
    after the global shift) at ``alpha``; never below 0 and never falling as prompts grow (so
    the prediction stays monotone in prompt length). A bucket with fewer than
    :data:`MIN_PROMPT_CALIBRATION_ROWS` rows takes the shorter bucket's shift."""
    bucket = prompt_bucket(input_tokens)
    shifts: list[float] = []
    for k in range(len(PROMPT_EDGES) + 1):
        rows = residual[bucket == k]
        own = conformal_offset(rows, alpha) if len(rows) >= MIN_PROMPT_CALIBRATION_ROWS else 0.0
        shifts.append(max(own, shifts[-1] if shifts else 0.0, 0.0))
    return tuple(shifts)


def conformal_offset(residual: FloatArray, alpha: float) -> float:
    """The shift making a share ``alpha`` of ``residual`` (log observed − log predicted) lie at
    or below zero, with the split-conformal finite-sample rank ⌈(n+1)·α⌉."""
    n = len(residual)
    if n == 0:
        return 0.0
    rank = min(n, math.ceil((n + 1) * alpha))
    return float(np.sort(residual)[rank - 1])


def fit_quantile_model(
    features: FeatureMatrix,
    latency: FloatArray,
    split: TimeSplit,
    *,
    target: Target,
    alpha: float,
    config: QuantileConfig,
    weight: FloatArray | None = None,
    mode: TargetMode | None = None,
) -> QuantileModel:
    """Boost one quantile model on ``split.train``, stop early on ``split.stop`` and calibrate
    on ``split.calibrate`` (an upper quantile's prompt shifts also on ``split.stop`` if
    ``config.prompt_shift_rows`` says "tail"). ``latency`` is the observed target (s), positive
    and finite on every row the split names. ``weight`` (per row, optional) weighs the training
    rows' loss.
    ``mode``: the target's form (default: the first of ``config.modes``)."""
    import lightgbm as lgb

    mode = mode or config.modes[0]
    y = _target_values(features, latency, target, mode)
    x = training_values(features, config.ignored_features)
    base = float(np.quantile(y[split.train], alpha))
    train = lgb.Dataset(
        x[split.train],
        y[split.train],
        weight=None if weight is None else weight[split.train],
        init_score=np.full(len(split.train), base),
        feature_name=list(FEATURES),
    )
    stop = lgb.Dataset(
        x[split.stop], y[split.stop], init_score=np.full(len(split.stop), base), reference=train
    )
    booster = train_booster(_params(config, target, alpha), train, stop, config)
    model = QuantileModel(
        target=target, alpha=alpha, mode=mode, booster=booster, base=base, offset=0.0
    )
    if not config.calibrate:
        return model
    rows = split.calibrate
    residual = np.log(latency[rows]) - np.log(model.predict(features.take(rows)))
    model = dataclasses.replace(model, offset=conformal_offset(residual, alpha))
    if alpha <= 0.5 or target not in config.prompt_calibration:
        return model
    shifted = residual - model.offset
    if config.prompt_shift_rows == "tail":
        rows = np.concatenate([split.stop, rows])
        shifted = np.log(latency[rows]) - np.log(model.predict(features.take(rows)))
    by_prompt = prompt_offsets(shifted, features.column("input_tokens")[rows], alpha)
    return dataclasses.replace(model, prompt_offsets=by_prompt)


def fit_target(
    features: FeatureMatrix,
    latency: FloatArray,
    split: TimeSplit,
    *,
    target: Target,
    config: QuantileConfig,
    weight: FloatArray | None = None,
) -> dict[float, QuantileModel]:
    """Every quantile of ``target`` (:data:`QUANTILES`). The p50 in the one of ``config.modes``
    whose p50 has the lower mean absolute percentage error on ``split.calibrate`` (rows no
    booster trained or stopped on); the others in ``config.upper_mode`` (the p50's if None)."""
    rows = split.calibrate
    observed = latency[rows]
    best: tuple[float, QuantileModel] | None = None
    for mode in config.modes:
        p50 = fit_quantile_model(
            features,
            latency,
            split,
            target=target,
            alpha=0.5,
            config=config,
            weight=weight,
            mode=mode,
        )
        ape = float(np.mean(np.abs(p50.predict(features.take(rows)) - observed) / observed))
        if best is None or ape < best[0]:
            best = (ape, p50)
    if best is None:
        raise InputError("no target mode to fit", field="modes", expected="log_ratio, log_latency")
    chosen = best[1]
    upper = config.upper_mode or chosen.mode
    models = {0.5: chosen}
    for alpha in QUANTILES:
        if alpha != 0.5:
            models[alpha] = fit_quantile_model(
                features,
                latency,
                split,
                target=target,
                alpha=alpha,
                config=config,
                weight=weight,
                mode=upper,
            )
    return models
