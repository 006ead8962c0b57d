"""The predictors' training frame: each served request beside its replica's state at arrival.

Each served request (``error == ""``) is joined with the latest sample of its replica taken at
or before its arrival (``pandas.merge_asof`` by replica, backward): the load it met. Rates come
from the counter deltas between that sample and the replica's previous one; a counter that went
down (the replica restarted) counts from zero, as Prometheus' ``rate()`` does.

Beside the router's own counters recorded with each request (``backlog_requests``,
``backlog_prefill_tokens``) the frame carries one more thing the router knows when it routes:
``backlog_oldest_wait_s``, how long the oldest request it sent to the same replica that has no
first token yet has been waiting (0 when none). It is derived from the requests themselves
(arrival and first-token times, in (arrival, request id) order; a request that never got a
first token is not counted, as its time of failure is not recorded). And
``routed_requests_per_s``: how many requests the router sent to the same replica per second
over the last :data:`ROUTED_RATE_WINDOW_S` before this one (failed ones too: it sent them),
its recent admission rate, which says how many requests will join the batch while this one
decodes. Over the frame's first window the count is divided by the time since the frame's
first request (at least 1 s): the counting starts there.

Excluded rows are counted, never dropped silently: ``frame.attrs["excluded"]`` is
``{"error": n, "no_prior_sample": m}`` — requests that failed or never finished, and served
requests that arrived before their replica's first sample. The latter are excluded rather than
given the first later sample's state, which would leak the future into the features.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pandas as pd

from training.telemetry.validate import validate_requests, validate_samples

REQUEST_COLUMNS = [
    "request_id",
    "arrival_time",
    "replica",
    "accelerator",
    "model",
    "tp",
    "tenant",
    "request_class",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "backlog_requests",
    "backlog_prefill_tokens",
    "ttft_s",
    "tpot_s",
    "e2e_s",
]
STATE_COLUMNS = [
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "prefix_cache_hit_rate",
    "sample_age_s",
]
TRAINING_COLUMNS = [
    "request_id",
    "arrival_time",
    "replica",
    "accelerator",
    "model",
    "tp",
    "tenant",
    "request_class",
    "input_tokens",
    "cached_tokens",
    "uncached_tokens",
    "output_tokens",
    "backlog_requests",
    "backlog_prefill_tokens",
    "backlog_oldest_wait_s",
    "routed_requests_per_s",
    "num_requests_running",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "prefix_cache_hit_rate",
    "sample_age_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
]


def _counter_delta(counter: pd.Series[int], replica: pd.Series[str]) -> pd.Series[float]:
    """Increase of a cumulative counter since the replica's previous sample (0 for the first);
    a decrease means the counter restarted, so the increase is its current value."""
    previous = counter.groupby(replica).shift(1)
    delta = (counter - previous).astype("float64")
    restarted = delta < 0
    delta[restarted] = counter[restarted].astype("float64")
    return delta.fillna(0.0)


def replica_state(samples: pd.DataFrame) -> pd.DataFrame:
    """Per sample, the gauges plus token rates and the prefix-cache hit rate over the interval
    since the same replica's previous sample; sorted by time."""
    s = samples.sort_values(["replica", "time"], kind="stable", ignore_index=True)
    replica = s["replica"]
    seconds = s["time"].groupby(replica).diff().dt.total_seconds().fillna(0.0)
    prompt = _counter_delta(s["prompt_tokens_total"], replica)
    generated = _counter_delta(s["generation_tokens_total"], replica)
    hits = _counter_delta(s["prefix_cache_hit_tokens_total"], replica)
    safe_seconds = seconds.where(seconds > 0, np.inf)
    state = pd.DataFrame(
        {
            "time": s["time"],
            "replica": replica,
            "num_requests_running": s["num_requests_running"],
            "num_requests_waiting": s["num_requests_waiting"],
            "kv_cache_usage_perc": s["kv_cache_usage_perc"],
            "prompt_tokens_per_s": prompt / safe_seconds,
            "generation_tokens_per_s": generated / safe_seconds,
            "prefix_cache_hit_rate": (hits / prompt.where(prompt > 0, np.inf)).clip(0.0, 1.0),
        }
    )
    return state.sort_values("time", kind="stable", ignore_index=True)


def oldest_wait_at_routing(requests: pd.DataFrame) -> pd.Series[float]:
    """Per request (same index): seconds since the oldest earlier request on its replica that
    still had no first token when it arrived was routed; 0 when there was none. "Earlier" is
    (arrival, request id) order; requests without a replica get 0."""
    out = np.zeros(len(requests))
    position = np.flatnonzero(requests["replica"].notna().to_numpy())
    routed = requests.iloc[position]
    if routed.empty:
        return pd.Series(out, index=requests.index)
    origin = routed["arrival_time"].min()
    arrival = (routed["arrival_time"] - origin).dt.total_seconds().to_numpy(dtype=np.float64)
    first = arrival + routed["ttft_s"].to_numpy(dtype=np.float64, na_value=np.nan)
    order = np.lexsort((routed["request_id"].to_numpy(), arrival))
    replicas = routed["replica"].astype(str).tolist()
    arrivals, firsts = arrival.tolist(), first.tolist()
    waiting: dict[str, list[tuple[float, float]]] = {}  # per replica: heap of (arrival, first)
    for k in order.tolist():
        heap = waiting.setdefault(replicas[k], [])
        now = arrivals[k]
        while heap and heap[0][1] <= now:  # the oldest got its first token by now
            heapq.heappop(heap)
        if heap:
            out[position[k]] = now - heap[0][0]
        if math.isfinite(firsts[k]):
            heapq.heappush(heap, (now, firsts[k]))
    return pd.Series(out, index=requests.index)


# the window over which the router's recent admissions to a replica are counted (s)
ROUTED_RATE_WINDOW_S = 15.0
# the shortest time a rate is taken over at the start of a frame (s)
MIN_RATE_SPAN_S = 1.0


def routed_rate_at_routing(
    requests: pd.DataFrame, window_s: float = ROUTED_RATE_WINDOW_S
) -> pd.Series[float]:
    """Per request (same index): requests routed to its replica in the ``window_s`` seconds up
    to its arrival and before it in (arrival, request id) order, per second. Near the frame's
    first arrival the rate is over the time since then (at least :data:`MIN_RATE_SPAN_S`), as
    nothing earlier is known; requests without a replica get 0."""
    out = np.zeros(len(requests))
    position = np.flatnonzero(requests["replica"].notna().to_numpy())
    routed = requests.iloc[position]
    if routed.empty:
        return pd.Series(out, index=requests.index)
    seconds = (routed["arrival_time"] - routed["arrival_time"].min()).dt.total_seconds()
    arrival = seconds.to_numpy(dtype=np.float64)
    replica = pd.factorize(routed["replica"].astype(str))[0].astype(np.float64)
    # one time axis for every replica: replica r's time t is r·span + t
    span = float(arrival.max()) + window_s + 1.0
    clock = replica * span + arrival
    order = np.lexsort((routed["request_id"].to_numpy(), arrival, replica))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    first_in_window = np.searchsorted(clock[order], clock - window_s, side="right")
    counted = rank - first_in_window
    elapsed = np.clip(arrival, MIN_RATE_SPAN_S, window_s)
    out[position] = counted / elapsed
    return pd.Series(out, index=requests.index)


def build_training_frame(requests: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """One row per served request with its replica's state at arrival (see the module doc).

    Inputs are frames in the telemetry schemas (validated here: bad input raises
    ``InputError``). Columns: :data:`TRAINING_COLUMNS`; ``sample_age_s`` is how old the joined
    sample was at arrival. Sorted by arrival time then request id.
    """
    validate_requests(requests)
    validate_samples(samples)
    requests = requests.assign(
        backlog_oldest_wait_s=oldest_wait_at_routing(requests),
        routed_requests_per_s=routed_rate_at_routing(requests),
    )
    served = requests[requests["error"] == ""]
    n_error = len(requests) - len(served)
    router = ["backlog_oldest_wait_s", "routed_requests_per_s"]
    served = served[[*REQUEST_COLUMNS, *router]].sort_values("arrival_time", kind="stable")
    state = replica_state(samples).rename(columns={"time": "sample_time"})
    if served.empty:  # pandas cannot merge_asof when both Arrow-backed string keys are empty
        joined = pd.concat([served, state.drop(columns="replica").iloc[:0]], axis=1)
    else:
        joined = pd.merge_asof(
            served,
            state,
            left_on="arrival_time",
            right_on="sample_time",
            by="replica",
            direction="backward",
        )
    has_sample = joined["sample_time"].notna()
    n_no_sample = int((~has_sample).sum())
    frame = joined[has_sample].copy()
    frame["sample_age_s"] = (frame["arrival_time"] - frame["sample_time"]).dt.total_seconds()
    frame["uncached_tokens"] = frame["input_tokens"] - frame["cached_tokens"]
    frame["tp"] = frame["tp"].astype("int32")
    for gauge in ("num_requests_running", "num_requests_waiting"):
        frame[gauge] = frame[gauge].astype("int64")
    frame = frame[TRAINING_COLUMNS].sort_values(
        ["arrival_time", "request_id"], kind="stable", ignore_index=True
    )
    frame.attrs["excluded"] = {"error": n_error, "no_prior_sample": n_no_sample}
    return frame
