"""The predictors' feature table, built vectorised from request rows.

A row is one request on one replica: the replica's kind (accelerator, model, tp), its load at
the request's arrival (vLLM's gauges and counter rates), the router's own counters for that
replica when it routed the request, and the request itself. Input columns
(:data:`INPUT_COLUMNS`) are those of :func:`training.dataset.build_training_frame`; extra
columns are ignored. The router's counters (:data:`ROUTER_COLUMNS`) may be absent: they are
then 0, which is what the telemetry schema records when the router did not say. A new
accelerator is a new catalogue row, not a new model: the replica enters the models only
through its datasheet numbers.

==============================  =======================================================  =====
feature                         meaning                                                  unit
==============================  =======================================================  =====
gpu_dense_tflops                dense BF16 peak of one accelerator                       TFLOPS
gpu_hbm_tbps                    HBM bandwidth of one accelerator                         TB/s
gpu_hbm_gb                      HBM capacity of one accelerator                          GB
gpu_link_gbps                   intra-node interconnect bandwidth per accelerator        GB/s
tp                              tensor-parallel degree (accelerators per replica)        count
model_params_b                  parameters, embeddings included                          1e9
model_active_params_b           parameters touched per token (MoE: routed experts)       1e9
model_layers                    decoder layers                                           count
model_hidden                    hidden size                                              count
model_kv_kib_per_token          KV cache per token, all layers, whole model              KiB
kv_capacity_ktokens             KV cache the replica holds (gpu_memory_utilization 0.9)  1e3 tok
num_requests_running            vllm:num_requests_running at arrival                     count
num_requests_waiting            vllm:num_requests_waiting at arrival                     count
kv_cache_usage_perc             vllm:kv_cache_usage_perc at arrival                      0..1
prompt_tokens_per_s             rate of vllm:prompt_tokens_total (cached included)       tok/s
generation_tokens_per_s         rate of vllm:generation_tokens_total                     tok/s
prefix_cache_hit_rate           prefix-cache hit tokens / prompt tokens, same interval   0..1
uncached_prompt_tokens_per_s    prompt_tokens_per_s × (1 − prefix_cache_hit_rate)        tok/s
backlog_requests                router's requests in flight on the replica at routing    count
backlog_prefill_tokens          their prompt tokens still without a first token          tokens
backlog_oldest_wait_s           how long the oldest of those has waited for it           s
backlog_prefill_left_tokens     the prefill ahead not yet done: backlog_prefill_tokens   tokens
                                − prefill rate (a full chunk per iteration) × that wait,
                                at least 0
input_tokens                    the request's prompt length                              tokens
uncached_tokens                 prompt tokens not served from the prefix cache           tokens
output_tokens                   expected output length (the actual one in training)      tokens
ttft_prior_log_s                ln of the roofline prior's TTFT                          ln s
ttft_prefill_prior_log_s        ln of its own-prefill part                               ln s
ttft_queue_prior_s              its queue part (0 when nothing waits or is backlogged)   s
tpot_prior_log_s                ln of the roofline prior's TPOT                          ln s
decode_step_prior_log_s         ln of its decode iteration (batch running + 1)           ln s
prefill_share_prior             its ρ: others' prefill share of iteration time           0..0.9
routed_requests_per_s           router's requests sent to the replica per second over    req/s
                                the last 15 s: its recent admission rate, the arrivals
                                expected to join the batch while the request decodes
==============================  =======================================================  =====

Every failure to read the rows raises :class:`~placement.errors.InputError` naming the
column and how many rows are wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.roofline_prior import (
    FloatArray,
    PriorInputs,
    PriorLatency,
    ReplicaKind,
    kind_roofline,
    prior_latency,
)
from placement.domain.accelerators import CATALOGUE as ACCELERATORS
from placement.domain.accelerators import get_accelerator
from placement.domain.llm import CATALOGUE as MODELS
from placement.domain.llm import get_model
from placement.errors import InputError, UnknownAccelerator, UnknownModel

KIND_COLUMNS = ("accelerator", "model", "tp")
LOAD_COLUMNS = (
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "prefix_cache_hit_rate",
)
ROUTER_COLUMNS = (
    "backlog_requests",
    "backlog_prefill_tokens",
    "backlog_oldest_wait_s",
    "routed_requests_per_s",
)
REQUEST_COLUMNS = ("input_tokens", "uncached_tokens", "output_tokens")
INPUT_COLUMNS = KIND_COLUMNS + LOAD_COLUMNS + ROUTER_COLUMNS + REQUEST_COLUMNS
# input columns a row must carry; the router's counters default to 0 (unknown)
REQUIRED_COLUMNS = KIND_COLUMNS + LOAD_COLUMNS + REQUEST_COLUMNS
# columns that are shares and must lie in [0, 1]
_SHARE_COLUMNS = ("kv_cache_usage_perc", "prefix_cache_hit_rate")

REPLICA_FEATURES = (
    "gpu_dense_tflops",
    "gpu_hbm_tbps",
    "gpu_hbm_gb",
    "gpu_link_gbps",
    "tp",
    "model_params_b",
    "model_active_params_b",
    "model_layers",
    "model_hidden",
    "model_kv_kib_per_token",
    "kv_capacity_ktokens",
)
LOAD_FEATURES = (*LOAD_COLUMNS, "uncached_prompt_tokens_per_s")
ROUTER_FEATURES = (*ROUTER_COLUMNS[:3], "backlog_prefill_left_tokens")
REQUEST_FEATURES = REQUEST_COLUMNS
PRIOR_FEATURES = (
    "ttft_prior_log_s",
    "ttft_prefill_prior_log_s",
    "ttft_queue_prior_s",
    "tpot_prior_log_s",
    "decode_step_prior_log_s",
    "prefill_share_prior",
)
# the router's recent admissions, which say how many requests join the batch during the
# decode (last: a booster configured to ignore it trains as if the column were not there)
ARRIVAL_FEATURES = ("routed_requests_per_s",)
FEATURES: tuple[str, ...] = (
    REPLICA_FEATURES
    + LOAD_FEATURES
    + ROUTER_FEATURES
    + REQUEST_FEATURES
    + PRIOR_FEATURES
    + ARRIVAL_FEATURES
)
FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(FEATURES)}


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureMatrix:
    """Features of a batch of rows (columns in :data:`FEATURES` order) and the prior behind them."""

    values: FloatArray
    prior: PriorLatency
    inputs: PriorInputs
    generation_tokens_per_s: FloatArray

    def column(self, name: str) -> FloatArray:
        return self.values[:, FEATURE_INDEX[name]]

    def take(self, rows: npt.NDArray[np.int64]) -> FeatureMatrix:
        """The rows ``rows``, prior and inputs included."""
        return FeatureMatrix(
            values=self.values[rows],
            prior=self.prior.take(rows),
            inputs=self.inputs.take(rows),
            generation_tokens_per_s=self.generation_tokens_per_s[rows],
        )


def _require_columns(frame: pd.DataFrame, source: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InputError(
            f"expected a table of rows, got {type(frame).__name__}",
            source=source,
            expected="a pandas DataFrame",
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            source=source,
            field=missing[0],
            expected="columns " + ", ".join(REQUIRED_COLUMNS),
        )


def _numbers(frame: pd.DataFrame, column: str, source: str) -> FloatArray:
    """A column as float64; every value finite and ≥ 0 (shares also ≤ 1)."""
    try:
        values = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        raise InputError(
            "not numeric", source=source, field=column, expected="numbers ≥ 0"
        ) from None
    upper = 1.0 + 1e-9 if column in _SHARE_COLUMNS else np.inf
    bad = ~(np.isfinite(values) & (values >= 0.0) & (values <= upper))
    if bad.any():
        first = int(np.argmax(bad))
        raise InputError(
            f"{int(bad.sum())} of {len(values)} rows out of range (first: row {first}, "
            f"value {frame[column].iloc[first]})",
            source=source,
            field=column,
            expected="a number in [0, 1]" if column in _SHARE_COLUMNS else "a finite number ≥ 0",
        )
    return values


def _lookup_names(
    values: pd.Series[str], source: str, column: str
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Factorise a name column; unknown names raise with their row counts."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if (codes < 0).any():
        raise InputError(
            f"{int((codes < 0).sum())} of {len(codes)} rows have no {column}",
            source=source,
            field=column,
            expected="a name",
        )
    return codes.astype(np.int64), [str(u) for u in uniques]


def resolve_kinds(
    frame: pd.DataFrame, *, source: str = "frame"
) -> tuple[tuple[ReplicaKind, ...], npt.NDArray[np.int64]]:
    """The distinct replica kinds of the rows and each row's index into them.

    Unknown accelerators or models raise :class:`UnknownAccelerator` / :class:`UnknownModel`
    naming the first unknown name and how many rows carry it.
    """
    acc_codes, acc_names = _lookup_names(frame["accelerator"], source, "accelerator")
    model_codes, model_names = _lookup_names(frame["model"], source, "model")
    tp = _numbers(frame, "tp", source)
    if ((tp < 1) | (tp != np.round(tp))).any():
        bad = int(((tp < 1) | (tp != np.round(tp))).sum())
        raise InputError(
            f"{bad} of {len(tp)} rows have a tensor-parallel degree that is not a whole number ≥ 1",
            source=source,
            field="tp",
            expected="1, 2, 4, 8…",
        )
    accelerators = []
    for i, name in enumerate(acc_names):
        try:
            accelerators.append(get_accelerator(name))
        except UnknownAccelerator:
            raise UnknownAccelerator(
                f"unknown accelerator '{name}' in {int((acc_codes == i).sum())} of "
                f"{len(acc_codes)} rows",
                source=source,
                field="accelerator",
                expected="one of " + ", ".join(sorted(ACCELERATORS)),
            ) from None
    models = []
    for i, name in enumerate(model_names):
        try:
            models.append(get_model(name))
        except UnknownModel:
            raise UnknownModel(
                f"unknown model '{name}' in {int((model_codes == i).sum())} of "
                f"{len(model_codes)} rows",
                source=source,
                field="model",
                expected="one of " + ", ".join(sorted(MODELS)),
            ) from None
    # one integer key per (accelerator, model, tp) combination, decoded again below
    tp_int = tp.astype(np.int64)
    tp_base = int(tp_int.max(initial=1)) + 1
    key = (acc_codes * len(model_names) + model_codes) * tp_base + tp_int
    unique_keys, index = np.unique(key, return_inverse=True)
    kinds: list[ReplicaKind] = []
    for j, k in enumerate(unique_keys.tolist()):
        rest, t = divmod(int(k), tp_base)
        a, m = divmod(rest, len(model_names))
        kind = ReplicaKind(accelerators[a], models[m], t)
        try:
            kind_roofline(kind)
        except InputError:
            raise InputError(
                f"{kind.model.name} ({kind.model.heads} attention heads) cannot be split over "
                f"tp={t} GPUs, in {int((index == j).sum())} of {len(index)} rows",
                source=source,
                field="tp",
                expected=f"a divisor of {kind.model.heads}",
            ) from None
        kinds.append(kind)
    return tuple(kinds), index.astype(np.int64).reshape(-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class RowInputs:
    """Validated rows: the prior's inputs and the numbers the prior does not read."""

    prior: PriorInputs
    generation_tokens_per_s: FloatArray
    backlog_requests: FloatArray
    # 0 when unknown (no wait: what a constrained model predicts latest for)
    backlog_oldest_wait_s: FloatArray
    # 0 when unknown (none routed: what a constrained model predicts earliest for)
    routed_requests_per_s: FloatArray


def parse_rows(frame: pd.DataFrame, *, source: str = "frame") -> RowInputs:
    """Validated inputs of the prior plus the generation-token rate, the router's backlog
    request count, its oldest wait and its recent admission rate (not prior inputs)."""
    _require_columns(frame, source)
    kinds, index = resolve_kinds(frame, source=source)
    num = {c: _numbers(frame, c, source) for c in LOAD_COLUMNS + REQUEST_COLUMNS}
    for c in ROUTER_COLUMNS:
        num[c] = _numbers(frame, c, source) if c in frame.columns else np.zeros(len(frame))
    over = num["uncached_tokens"] > num["input_tokens"]
    if over.any():
        raise InputError(
            f"{int(over.sum())} of {len(over)} rows have more uncached than input tokens",
            source=source,
            field="uncached_tokens",
            expected="uncached_tokens ≤ input_tokens",
        )
    inputs = PriorInputs(
        kinds=kinds,
        kind_index=index,
        input_tokens=num["input_tokens"],
        uncached_tokens=num["uncached_tokens"],
        output_tokens=num["output_tokens"],
        running=num["num_requests_running"],
        waiting=num["num_requests_waiting"],
        kv_usage=num["kv_cache_usage_perc"],
        prompt_tokens_per_s=num["prompt_tokens_per_s"],
        prefix_cache_hit_rate=num["prefix_cache_hit_rate"],
        backlog_prefill_tokens=num["backlog_prefill_tokens"],
    )
    return RowInputs(
        prior=inputs,
        generation_tokens_per_s=num["generation_tokens_per_s"],
        backlog_requests=num["backlog_requests"],
        backlog_oldest_wait_s=num["backlog_oldest_wait_s"],
        routed_requests_per_s=num["routed_requests_per_s"],
    )


def _replica_columns(kinds: tuple[ReplicaKind, ...]) -> FloatArray:
    """One row of :data:`REPLICA_FEATURES` per kind."""
    rows = []
    for k in kinds:
        acc, model = k.accelerator, k.model
        rows.append(
            (
                acc.dense_bf16_tflops,
                acc.hbm_tbps,
                acc.hbm_gb,
                acc.interconnect_gbps,
                float(k.tp),
                model.params / 1e9,
                model.active_params / 1e9,
                float(model.layers),
                float(model.hidden),
                model.kv_bytes_per_token() / 1024.0,
                kind_roofline(k).kv_capacity_tokens / 1e3,
            )
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(kinds), len(REPLICA_FEATURES))


def feature_matrix(frame: pd.DataFrame, *, source: str = "frame") -> FeatureMatrix:
    """Features of every row (see the module table) plus the prior they include."""
    return features_of(parse_rows(frame, source=source))


def _prefill_left(inputs: PriorInputs, waited_s: FloatArray) -> FloatArray:
    """Prompt tokens ahead still to prefill if the replica has prefilled full chunks since the
    oldest of them was routed (never below 0)."""
    rate = np.asarray(
        [
            kind_roofline(k).max_batched_tokens / kind_roofline(k).full_chunk_s()
            for k in inputs.kinds
        ],
        dtype=np.float64,
    ).reshape(len(inputs.kinds))[inputs.kind_index]
    left: FloatArray = np.maximum(inputs.backlog_prefill_tokens - rate * waited_s, 0.0)
    return left


def features_of(rows: RowInputs) -> FeatureMatrix:
    """Features of already validated rows (no table in between: capacity at SLO builds
    :class:`RowInputs` straight from arrays, thousands of times per table)."""
    inputs, generation = rows.prior, rows.generation_tokens_per_s
    prior = prior_latency(inputs)
    n = len(inputs.kind_index)
    values = np.empty((n, len(FEATURES)), dtype=np.float64)
    r = len(REPLICA_FEATURES)
    values[:, :r] = _replica_columns(inputs.kinds)[inputs.kind_index]

    load = (
        inputs.running,
        inputs.waiting,
        inputs.kv_usage,
        inputs.prompt_tokens_per_s,
        generation,
        inputs.prefix_cache_hit_rate,
        inputs.prompt_tokens_per_s * (1.0 - inputs.prefix_cache_hit_rate),
        rows.backlog_requests,
        inputs.backlog_prefill_tokens,
        rows.backlog_oldest_wait_s,
        _prefill_left(inputs, rows.backlog_oldest_wait_s),
        inputs.input_tokens,
        inputs.uncached_tokens,
        inputs.output_tokens,
        np.log(prior.ttft_s),
        np.log(prior.prefill_s),
        prior.queue_s,
        np.log(prior.tpot_s),
        np.log(prior.decode_step_s),
        prior.prefill_share,
        rows.routed_requests_per_s,
    )
    for j, column in enumerate(load, start=r):
        values[:, j] = column
    return FeatureMatrix(
        values=values, prior=prior, inputs=inputs, generation_tokens_per_s=generation
    )


def build_features(frame: pd.DataFrame, *, source: str = "frame") -> FloatArray:
    """The feature array, shape (rows, len(FEATURES)), columns in :data:`FEATURES` order."""
    return feature_matrix(frame, source=source).values


def features_frame(frame: pd.DataFrame, *, source: str = "frame") -> pd.DataFrame:
    """The same features as a labelled table (for inspection and reports)."""
    return pd.DataFrame(build_features(frame, source=source), columns=list(FEATURES))
