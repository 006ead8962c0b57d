"""Choosing the cost model: profiled when the tables cover the shapes, else a roofline and why."""

from __future__ import annotations

import re

import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import ReplicaSpec
from placement.domain.llm import get_model
from placement.errors import InputError
from sim.costmodel.factory import cost_model_for, cost_model_for_replica
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import profiles_root
from sim.costmodel.roofline import RooflineCostModel

pytestmark = pytest.mark.skipif(not profiles_root().is_dir(), reason="shared profiles missing")


@pytest.mark.parametrize(
    ("kind", "model", "tp"),
    [
        ("H100-SXM", "llama-3-8b", 1),
        ("A100-80G", "llama-2-70b", 4),
        ("B200", "mixtral-8x7b", 8),
        ("L40S", "qwen3-30b-a3b", 1),
        ("H100-SXM", "qwen3-30b-a3b", 2),
    ],
)
def test_profiled_when_tables_cover_the_model(kind, model, tp):
    assert isinstance(
        cost_model_for(get_accelerator(kind), get_model(model), tp), ProfiledCostModel
    )


@pytest.mark.parametrize(
    ("kind", "model", "tp", "reason"),
    [
        ("L4", "llama-3-8b", 1, "'L4' has no measured operator profile"),
        ("A100-80G", "qwen2.5-32b", 4, "no context attention for heads=10 kv_heads=2"),
        ("L40S", "llama-3-8b", 2, "no all-reduce table for 2 GPUs"),
        ("A100-80G", "qwen3-30b-a3b", 8, "no bf16 MoE rows .* moe_tp=8"),
    ],
)
def test_unknown_shapes_fall_back_to_roofline_with_a_reason(kind, model, tp, reason):
    cm = cost_model_for(get_accelerator(kind), get_model(model), tp)
    assert isinstance(cm, RooflineCostModel)
    assert re.search(reason, cm.reason)
    assert cm.iteration_s([(1024, 0)], 8, 8000) > 0.0


def test_models_are_shared_per_replica_kind():
    spec = ReplicaSpec(
        id="r0",
        kind="h100",
        accelerator=get_accelerator("H100-SXM"),
        model=get_model("llama-3-8b"),
        tp=1,
        cost_per_hour=4.0,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        kv_capacity_tokens=400_000,
    )
    assert cost_model_for_replica(spec) is cost_model_for(spec.accelerator, spec.model, 1)


def test_bad_tp_is_an_input_error_not_a_fallback():
    with pytest.raises(InputError, match="tp=3"):
        cost_model_for(get_accelerator("H100-SXM"), get_model("llama-3-8b"), 3)
