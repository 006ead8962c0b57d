"""What one iteration runs on one GPU of a tensor-parallel replica, and its measured cost.

Per decoder layer, with ``tp`` GPUs (Megatron-style sharding, as vLLM does it):

==========================  =======================================  ==================
operator                    GEMM ``n``                               GEMM ``k``
==========================  =======================================  ==================
QKV projection              ``(heads + 2·kv_heads)·head_dim / tp``   ``hidden``
O projection                ``hidden``                               ``heads·head_dim/tp``
MLP gate+up (dense)         ``2·intermediate / tp``                  ``hidden``
MLP down (dense)            ``hidden``                               ``intermediate/tp``
MoE router (MoE)            ``num_experts`` (replicated)             ``hidden``
==========================  =======================================  ==================

MoE models replace the MLP by the fused-experts kernel of the ``moe`` table
(``moe_tp_size = tp``, ``moe_ep_size = 1``). With ``tp > 1`` each layer ends its attention and
its MLP with an all-reduce of ``m·hidden·2`` bytes. Once per iteration the LM head
(``n = vocab/tp``, ``k = hidden``) turns the sampled positions into logits.

When ``kv_heads < tp`` vLLM replicates KV heads so that each GPU holds one; the per-GPU head
counts below follow that rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.interpolate import FloatArray, gemm_latency_many, loglog_many
from sim.costmodel.profiles import Curve, OperatorProfile, ShapeNotProfiled

# Logits are computed only at sampled positions (one per running sequence, at most
# max_num_seqs = 256 by default). linear_s sees tokens, not sequences, so it charges the LM head
# for min(tokens, 256) rows: exact for pure decode up to 256 sequences; for prefill-heavy
# iterations the LM head is weight-read bound, so 256 rows cost about what 1–256 rows cost.
LM_HEAD_MAX_ROWS = 256
ALL_REDUCES_PER_LAYER = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmShape:
    """One GEMM ``[m, k] @ [k, n]`` (``m`` = tokens), run ``count`` times per layer."""

    name: str
    n: int
    k: int
    count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeShape:
    """The fused-experts call of one MoE layer, keyed as in the ``moe`` table."""

    hidden: int
    inter: int
    topk: int
    num_experts: int
    tp: int

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        return (self.hidden, self.inter, self.topk, self.num_experts, self.tp)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardShapes:
    """One GPU's share of a model under tensor parallelism ``tp``."""

    model: ModelArchitecture
    tp: int
    heads: int
    kv_heads: int
    head_dim: int
    layer_gemms: tuple[GemmShape, ...]
    lm_head: GemmShape
    moe: MoeShape | None

    @property
    def layers(self) -> int:
        return self.model.layers

    @property
    def head_key(self) -> tuple[int, int, int]:
        return (self.heads, self.kv_heads, self.head_dim)

    @property
    def all_reduces_per_layer(self) -> int:
        return ALL_REDUCES_PER_LAYER if self.tp > 1 else 0

    def all_reduce_bytes(self, tokens: FloatArray) -> FloatArray:
        """Bytes of each all-reduce: the bf16 hidden state of every token."""
        return tokens * self.model.hidden * self.model.dtype_bytes


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shard_shapes(model: ModelArchitecture, tp: int) -> ShardShapes:
    """Per-GPU operator shapes of ``model`` on ``tp`` GPUs; InputError if it cannot be split."""
    if tp < 1 or model.heads % tp != 0:
        raise InputError(
            f"model '{model.name}' with {model.heads} attention heads cannot be split over "
            f"tp={tp} GPUs",
            field="tp",
            expected=f"a divisor of {model.heads}",
        )
    heads = model.heads // tp
    kv_heads = max(1, model.kv_heads // tp)
    gemms = [
        GemmShape(name="qkv_proj", n=(heads + 2 * kv_heads) * model.head_dim, k=model.hidden),
        GemmShape(name="o_proj", n=model.hidden, k=heads * model.head_dim),
    ]
    moe = None
    if model.is_moe:
        gemms.append(GemmShape(name="router", n=model.num_experts, k=model.hidden))
        moe = MoeShape(
            hidden=model.hidden,
            inter=model.intermediate,
            topk=model.experts_per_token,
            num_experts=model.num_experts,
            tp=tp,
        )
    else:
        inter = _ceil_div(model.intermediate, tp)
        gemms.append(GemmShape(name="gate_up_proj", n=2 * inter, k=model.hidden))
        gemms.append(GemmShape(name="down_proj", n=model.hidden, k=inter))
    return ShardShapes(
        model=model,
        tp=tp,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=model.head_dim,
        layer_gemms=tuple(gemms),
        lm_head=GemmShape(name="lm_head", n=_ceil_div(model.vocab, tp), k=model.hidden),
        moe=moe,
    )


def lm_head_rows(tokens: FloatArray) -> FloatArray:
    """Rows the LM head processes for an iteration of ``tokens`` tokens (see LM_HEAD_MAX_ROWS)."""
    return np.minimum(tokens, LM_HEAD_MAX_ROWS)


def profiled_linear_many(
    profile: OperatorProfile, shapes: ShardShapes, tokens: FloatArray
) -> FloatArray:
    """Measured token-linear time (s) of one iteration for every token count in ``tokens``.

    ``layers × (GEMMs + MoE + all-reduces) + LM head``. Raises :class:`ShapeNotProfiled` when a
    table lacks a shape (MoE key, all-reduce GPU count, GEMM column).
    """
    per_layer = np.zeros_like(tokens, dtype=np.float64)
    for gemm in shapes.layer_gemms:
        per_layer += gemm.count * gemm_latency_many(profile, tokens, gemm.n, gemm.k)
    if shapes.moe is not None:
        per_layer += loglog_many(moe_curve(profile, shapes.moe), tokens)
    if shapes.all_reduces_per_layer:
        per_layer += shapes.all_reduces_per_layer * loglog_many(
            all_reduce_curve(profile, shapes.tp), shapes.all_reduce_bytes(tokens)
        )
    lm_head = gemm_latency_many(profile, lm_head_rows(tokens), shapes.lm_head.n, shapes.lm_head.k)
    return shapes.layers * per_layer + lm_head


def moe_curve(profile: OperatorProfile, moe: MoeShape) -> Curve:
    """Fused-experts latency over tokens for one MoE layer shape."""
    curve = profile.moe.get(moe.key)
    if curve is None:
        hidden, inter, topk, experts, tp = moe.key
        raise ShapeNotProfiled(
            f"profile '{profile.name}' has no bf16 MoE rows for hidden={hidden} inter={inter} "
            f"topk={topk} experts={experts} moe_tp={tp} ep=1"
        )
    return curve


def all_reduce_curve(profile: OperatorProfile, tp: int) -> Curve:
    """All-reduce latency over message bytes on ``tp`` GPUs."""
    curve = profile.all_reduce.get(tp)
    if curve is None:
        raise ShapeNotProfiled(f"profile '{profile.name}' has no all-reduce table for {tp} GPUs")
    return curve


def context_attention_curves(profile: OperatorProfile, shapes: ShardShapes) -> dict[int, Curve]:
    """Prefill attention latency over ``isl``, per batch size, for the per-GPU head shape."""
    curves = profile.context_attention.get(shapes.head_key)
    if curves is None:
        raise ShapeNotProfiled(
            f"profile '{profile.name}' has no context attention for heads={shapes.heads} "
            f"kv_heads={shapes.kv_heads} head_dim={shapes.head_dim}"
        )
    return curves


def generation_attention_curves(profile: OperatorProfile, shapes: ShardShapes) -> dict[int, Curve]:
    """Decode attention latency over context length, per batch size, for the head shape."""
    curves = profile.generation_attention.get(shapes.head_key)
    if curves is None:
        raise ShapeNotProfiled(
            f"profile '{profile.name}' has no generation attention for heads={shapes.heads} "
            f"kv_heads={shapes.kv_heads} head_dim={shapes.head_dim}"
        )
    return curves
