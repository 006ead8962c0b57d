"""Measured latencies from outside the telemetry, as training rows.

Splitwise's ``profiles/splitwise/perf_model.csv`` times Llama-2-70B at TP 2/4/8 on A100 and
H100: ``batch_size`` prompts of ``prompt_size`` tokens arriving together (``prompt_time``,
their joint prefill, ms) and decoding together (``token_time``, ms per token). As predictor
rows: an otherwise idle replica (running = batch, waiting = 0, uncached = prompt) whose router
has the batch's other prompts in flight (``backlog_requests = batch − 1``,
``backlog_prefill_tokens = (batch − 1) · prompt_size``), with ``ttft_s`` = prompt time and
``tpot_s`` = token time. They teach the predictors how a real serving stack runs, which the
simulator (its own vLLM-shaped cost model) cannot; see
:meth:`models.predictor.LatencyPredictor.fit` for how they are weighed.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from placement.errors import InputError
from placement.paths import shared_file

SPLITWISE_CSV = Path("profiles") / "splitwise" / "perf_model.csv"
SPLITWISE_HARDWARE = {"a100-80gb": "A100-80G", "h100-80gb": "H100-SXM"}
SPLITWISE_COLUMNS = (
    "model",
    "hardware",
    "tensor_parallel",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
)


NUMERIC_COLUMNS = (
    "tensor_parallel",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
)
INTEGER_COLUMNS = ("tensor_parallel", "prompt_size", "batch_size", "token_size")


def read_splitwise_csv(csv: Path) -> pd.DataFrame:
    """The CSV with every column :func:`splitwise_frame` uses present and numeric where it
    must be; any other file (binary, truncated mid-row, a column missing or not a number) is
    an :class:`InputError` naming the file, the line and the column."""
    try:
        raw = pd.read_csv(csv, encoding="utf-8", skip_blank_lines=False)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"cannot read measurements: byte {exc.start} is not UTF-8 text (a binary file?)",
            source=str(csv),
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError("empty file", source=str(csv), expected="a Splitwise CSV") from None
    except (OSError, pd.errors.ParserError) as exc:
        reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())
        raise InputError(f"cannot read measurements: {reason}", source=str(csv)) from None
    missing = [c for c in SPLITWISE_COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(
            f"missing column {missing[0]}", source=str(csv), field=missing[0], expected="Splitwise"
        )
    raw = raw.dropna(how="all")  # blank lines (kept above so the index counts file lines)
    numbers = {c: pd.to_numeric(raw[c], errors="coerce") for c in NUMERIC_COLUMNS}
    bad = pd.DataFrame({c: _not_valid(v, integer=c in INTEGER_COLUMNS) for c, v in numbers.items()})
    if bad.to_numpy().any():
        row = int(bad.any(axis=1).to_numpy().argmax())  # the first bad line, its first column
        column = next(c for c in raw.columns if c in numbers and bad[c].iloc[row])
        given = raw[column].iloc[row]
        raise InputError(
            "empty (a truncated file?)" if pd.isna(given) else f"'{given}' is not a number",
            source=str(csv),
            line=int(raw.index.to_numpy()[row]) + 2,  # the header is line 1; blank lines counted
            field=column,
            expected="an integer" if column in INTEGER_COLUMNS else "a number",
        )
    for column, values in numbers.items():
        raw[column] = values
    return raw


def _not_valid(values: pd.Series, *, integer: bool) -> pd.Series:
    bad = values.isna() | ~values.abs().lt(float("inf"))
    return bad | values.ne(values.round()) if integer else bad


def splitwise_frame(path: Path | None = None) -> pd.DataFrame:
    """Splitwise's Llama-2-70B rows on A100/H100 as predictor rows (see the module doc)."""
    raw = read_splitwise_csv(path or shared_file(SPLITWISE_CSV))
    raw = raw[(raw["model"] == "llama2-70b") & raw["hardware"].isin(list(SPLITWISE_HARDWARE))]
    batch = raw["batch_size"].astype("int64")
    prompt = raw["prompt_size"].astype("int64")
    return pd.DataFrame(
        {
            "accelerator": raw["hardware"].map(SPLITWISE_HARDWARE),
            "model": "llama-2-70b",
            "tp": raw["tensor_parallel"].astype("int32"),
            "num_requests_running": batch,
            "num_requests_waiting": 0,
            "kv_cache_usage_perc": 0.0,
            "prompt_tokens_per_s": 0.0,
            "generation_tokens_per_s": 0.0,
            "prefix_cache_hit_rate": 0.0,
            "backlog_requests": batch - 1,
            "backlog_prefill_tokens": (batch - 1) * prompt,
            "backlog_oldest_wait_s": 0.0,  # the batch arrives at once
            "routed_requests_per_s": 0.0,  # and nothing joins it
            "input_tokens": prompt,
            "uncached_tokens": prompt,
            "output_tokens": raw["token_size"].astype("int64"),
            "ttft_s": raw["prompt_time"] / 1e3,
            "tpot_s": raw["token_time"] / 1e3,
        }
    ).reset_index(drop=True)


def load_measurements(name_or_path: str) -> pd.DataFrame:
    """``splitwise`` (the shipped Splitwise profile) or a CSV in Splitwise's columns."""
    if name_or_path == "splitwise":
        return splitwise_frame()
    return splitwise_frame(Path(name_or_path))
