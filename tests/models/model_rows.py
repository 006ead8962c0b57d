"""Prediction rows for the predictor tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import pandas as pd


def request_rows(n: int = 1, **overrides: object) -> pd.DataFrame:
    """``n`` identical prediction rows of a lightly loaded H100 serving Llama-3-8B."""
    row: dict[str, object] = {
        "accelerator": "H100-SXM",
        "model": "llama-3-8b",
        "tp": 1,
        "num_requests_running": 8,
        "num_requests_waiting": 0,
        "kv_cache_usage_perc": 0.1,
        "prompt_tokens_per_s": 4000.0,
        "generation_tokens_per_s": 600.0,
        "prefix_cache_hit_rate": 0.3,
        "backlog_requests": 8,
        "backlog_prefill_tokens": 0,
        "input_tokens": 1500,
        "uncached_tokens": 1000,
        "output_tokens": 200,
    }
    row.update(overrides)
    return pd.DataFrame([row] * n)
