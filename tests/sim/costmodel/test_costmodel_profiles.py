"""Loading the measured tables: the right rows, the fastest kernel, errors that say where."""

from __future__ import annotations

import pandas as pd
import pytest

from placement.errors import InputError, ProfileUnavailable
from sim.costmodel.profiles import load_profile, profiles_root

pytestmark = pytest.mark.skipif(not profiles_root().is_dir(), reason="shared profiles missing")


def _raw(profile, op, table):
    return pd.read_parquet(next((profiles_root() / profile / op / "vllm").glob(f"*/{table}")))


def test_profiles_are_cached_and_name_their_version():
    h100 = load_profile("h100_sxm")
    assert load_profile("h100_sxm") is h100
    assert h100.version == "0.24.0"
    assert load_profile("a100_sxm").version == "0.14.0"


@pytest.mark.parametrize(("batch", "isl"), [(1, 1024), (8, 4096), (64, 128)])
def test_context_attention_keeps_bf16_full_window_fastest(batch, isl):
    raw = _raw("h100_sxm", "attention", "context_attention_perf.parquet")
    rows = raw[
        (raw.num_heads == 32)
        & (raw.num_key_value_heads == 8)
        & (raw.head_dim == 128)
        & (raw.batch_size == batch)
        & (raw.isl == isl)
        & (raw.kv_cache_dtype == "bfloat16")
        & (raw.attn_dtype == "bfloat16")
        & (raw.window_size == 0)
    ]
    curve = load_profile("h100_sxm").context_attention[(32, 8, 128)][batch]
    assert curve.ys[curve.xs.index(isl)] == pytest.approx(rows.latency.min() / 1e3)
    # the fp8-cache rows of the same point are not what we kept
    assert curve.ys[curve.xs.index(isl)] * 1e3 <= rows.latency.max() + 1e-12


def test_generation_attention_is_indexed_by_context_length():
    curves = load_profile("a100_sxm").generation_attention[(32, 4, 128)]
    raw = _raw("a100_sxm", "attention", "generation_attention_perf.parquet")
    row = raw[
        (raw.num_heads == 32)
        & (raw.num_key_value_heads == 4)
        & (raw.batch_size == 16)
        & (raw.step == 4095)
    ]
    context = int(row.isl.iloc[0] + row.step.iloc[0])
    assert curves[16].ys[curves[16].xs.index(context)] == pytest.approx(row.latency.min() / 1e3)


@pytest.mark.parametrize(
    ("profile", "distribution"), [("h100_sxm", "balanced"), ("a100_sxm", "power_law_1.01")]
)
def test_moe_prefers_balanced_routing_when_measured(profile, distribution):
    raw = _raw(profile, "moe", "moe_perf.parquet")
    rows = raw[
        (raw.moe_dtype == "bfloat16")
        & (raw.hidden_size == 4096)
        & (raw.inter_size == 14336)
        & (raw.topk == 2)
        & (raw.num_experts == 8)
        & (raw.moe_tp_size == 2)
        & (raw.moe_ep_size == 1)
        & (raw.num_tokens == 256)
        & (raw.distribution == distribution)
    ]
    curve = load_profile(profile).moe[(4096, 14336, 2, 8, 2)]
    assert curve.ys[curve.xs.index(256)] == pytest.approx(rows.latency.min() / 1e3)
    assert load_profile(profile).moe_routing[(4096, 14336, 2, 8, 2)] == distribution


def test_all_reduce_uses_the_fastest_variant_and_is_optional():
    raw = _raw("h100_sxm", "comm", "custom_allreduce_perf.parquet")
    rows = raw[(raw.num_gpus == 4) & (raw.message_size == 1 << 20)]
    curve = load_profile("h100_sxm").all_reduce[4]
    assert curve.ys[curve.xs.index(1 << 20)] == pytest.approx(rows.latency.min() / 1e3)
    assert load_profile("l40s").all_reduce == {}  # L40S has no comm table


def test_unknown_profile_is_unavailable():
    with pytest.raises(ProfileUnavailable, match="no GEMM/attention tables"):
        load_profile("no_such_gpu")


def test_missing_column_names_file_and_field(tmp_path, monkeypatch):
    root = tmp_path / "profiles" / "aiconfigurator" / "broken_gpu"
    for op in ("gemm", "attention"):
        (root / op / "vllm" / "1.0.0").mkdir(parents=True)
    pd.DataFrame({"gemm_dtype": ["bfloat16"], "m": [1], "n": [64], "latency": [0.01]}).to_parquet(
        root / "gemm" / "vllm" / "1.0.0" / "gemm_perf.parquet"
    )
    monkeypatch.setenv("PLACEMENT_SHARED_DATA", str(tmp_path))
    with pytest.raises(InputError, match=r"gemm_perf\.parquet.*field 'k'"):
        load_profile("broken_gpu")
