"""Per-GPU operator shapes under tensor parallelism, and their measured composition."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from placement.domain.llm import get_model
from placement.errors import InputError
from sim.costmodel.interpolate import loglog
from sim.costmodel.operators import ShardShapes, profiled_linear_many, shard_shapes
from sim.costmodel.profiles import load_profile, profiles_root


def _gemms(shapes: ShardShapes) -> dict[str, tuple[int, int]]:
    return {g.name: (g.n, g.k) for g in shapes.layer_gemms}


@pytest.mark.parametrize(
    ("model", "tp", "expected"),
    [
        # n = (heads + 2·kv)·head_dim/tp, k = hidden; O: n = hidden, k = heads·head_dim/tp; …
        (
            "llama-2-70b",
            2,
            {
                "qkv_proj": (5120, 8192),
                "o_proj": (8192, 4096),
                "gate_up_proj": (28672, 8192),
                "down_proj": (8192, 14336),
            },
        ),
        (
            "llama-3-8b",
            1,
            {
                "qkv_proj": (6144, 4096),
                "o_proj": (4096, 4096),
                "gate_up_proj": (28672, 4096),
                "down_proj": (4096, 14336),
            },
        ),
        (
            "mixtral-8x7b",
            4,
            {"qkv_proj": (1536, 4096), "o_proj": (4096, 1024), "router": (8, 4096)},
        ),
    ],
)
def test_layer_gemm_shapes(model, tp, expected):
    assert _gemms(shard_shapes(get_model(model), tp)) == expected


def test_lm_head_heads_and_moe_key():
    shapes = shard_shapes(get_model("mixtral-8x7b"), 2)
    assert (shapes.lm_head.n, shapes.lm_head.k) == (16000, 4096)
    assert shapes.head_key == (16, 4, 128)
    assert shapes.moe is not None and shapes.moe.key == (4096, 14336, 2, 8, 2)
    assert shard_shapes(get_model("llama-3-8b"), 1).all_reduces_per_layer == 0
    assert shard_shapes(get_model("llama-3-8b"), 2).all_reduces_per_layer == 2


@pytest.mark.parametrize(("model", "tp", "kv"), [("llama-2-70b", 8, 1), ("qwen3-30b-a3b", 8, 1)])
def test_kv_heads_are_replicated_when_fewer_than_gpus(model, tp, kv):
    assert shard_shapes(get_model(model), tp).kv_heads == kv


def test_tp_must_divide_heads():
    with pytest.raises(InputError, match="tp=3"):
        shard_shapes(get_model("llama-3-8b"), 3)


@pytest.mark.skipif(not profiles_root().is_dir(), reason="shared profiles missing")
def test_tp_adds_two_all_reduces_per_layer():
    # 8 tokens × 8192 hidden × 2 bytes = 128 KiB: a measured message size
    profile, model = load_profile("h100_sxm"), get_model("llama-2-70b")
    shapes = shard_shapes(model, 2)
    no_comm = replace(shapes, tp=1)  # same per-GPU shapes, no all-reduce
    tokens = np.asarray([8.0])
    extra = profiled_linear_many(profile, shapes, tokens) - profiled_linear_many(
        profile, no_comm, tokens
    )
    per_call = loglog(profile.all_reduce[2], 8 * 8192 * 2)
    assert per_call == profile.all_reduce[2].ys[profile.all_reduce[2].xs.index(131072)]
    assert extra[0] == pytest.approx(2 * model.layers * per_call, rel=1e-9)
