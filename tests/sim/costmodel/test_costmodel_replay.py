"""What a measured run did, replayed: llama-bench's one sequence, KV footprints, memory."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement.domain.llm import get_model
from sim.costmodel.linear import LinearCostModel
from sim.costmodel.replay import (
    FASTGEN_RESERVE_GB,
    Run,
    chunked_prompt_s,
    e2e_s,
    kernel_tp,
    kv_footprint,
    llama_bench_s,
    mean_decode_s,
    measured_kv_tokens,
    predictor,
    prefill_s,
)

CM = LinearCostModel(overhead_s=0.004, per_token_s=2e-5, attn_pair_s=1e-8, per_context_token_s=1e-7)


def _run(framework: str, batch: int, length: int = 512, tp: int = 1) -> Run:
    return Run(
        source="llm_inference_bench",
        hardware="H100-SXM",
        framework=framework,
        model="llama-3-8b",
        tp=tp,
        phase="e2e",
        batch=batch,
        prompt=length,
        tokens=length,
        measured_s=1.0,
    )


def test_a_prompt_in_chunks_attends_to_the_chunks_before_it() -> None:
    # 1000 tokens, 64 a call: 15 full chunks at contexts 0, 64, … 896 and one of 40 at 960
    by_hand = sum(prefill_s_at(64, 64 * k) for k in range(15)) + prefill_s_at(40, 960)
    assert chunked_prompt_s(CM, 1000, 64) == pytest.approx(by_hand, rel=1e-12)
    assert chunked_prompt_s(CM, 1000, 4096) == pytest.approx(prefill_s(CM, 1, 1000), rel=1e-12)


def prefill_s_at(chunk: int, context: int) -> float:
    return CM.iteration_s([(chunk, context)], 0, 0)


def test_llama_bench_is_one_sequence_whatever_its_batch_size() -> None:
    # llama-bench -pg 512,512 -b 64: one sequence, its prompt 64 tokens a call, then 512 steps
    one = llama_bench_s(CM, chunk=64, length=512, gpus=1)
    assert one == pytest.approx(
        chunked_prompt_s(CM, 512, 64) + 512 * mean_decode_s(CM, 1, 512, 512), rel=1e-12
    )
    # a larger -b only makes the prompt cheaper (fewer calls); it never adds sequences
    assert llama_bench_s(CM, 1, 512, 1) > llama_bench_s(CM, 16, 512, 1) > one
    assert one < e2e_s(CM, 64, 512) / 2  # the old reading: 64 sequences decoded together
    assert predictor(_run("llama.cpp", 64))(CM) == pytest.approx(one)
    assert predictor(_run("vLLM", 64))(CM) == pytest.approx(e2e_s(CM, 64, 512))


def test_llama_bench_pipelines_the_prompt_through_the_gpus_holding_the_layers() -> None:
    # the layers split over 4 GPUs: every step runs through all of them in turn (the kernels of
    # one GPU holding the whole model), but the prompt's 512 calls flow through 4 stages
    assert kernel_tp(_run("llama.cpp", 1, tp=4)) == 1 and kernel_tp(_run("vLLM", 1, tp=4)) == 4
    decode = 512 * mean_decode_s(CM, 1, 512, 512)
    prompt = chunked_prompt_s(CM, 512, 1)
    four = llama_bench_s(CM, chunk=1, length=512, gpus=4)
    assert four - decode == pytest.approx(prompt * (512 + 3) / (512 * 4), rel=1e-12)


def test_tensorrt_llm_and_fastgen_admit_a_sequence_against_its_whole_length() -> None:
    assert kv_footprint("TensorRT-LLM", 1024) == 2048
    assert kv_footprint("Deepspeed-MII", 1024) == 2048
    assert kv_footprint("vLLM", 1024) == 1536
    # 16 sequences of 1024 in, 1024 out with 20k tokens of KV: vLLM runs 13 (20000 // 1536),
    # then 3; TensorRT-LLM 9 (20000 // 2048), then 7
    vllm = predictor(_run("vLLM", 16, 1024), kv_tokens=20_000)(CM)
    trt = predictor(_run("TensorRT-LLM", 16, 1024), kv_tokens=20_000)(CM)
    assert vllm == pytest.approx(e2e_s(CM, 13, 1024) + e2e_s(CM, 3, 1024))
    assert trt == pytest.approx(e2e_s(CM, 9, 1024) + e2e_s(CM, 7, 1024))


def test_a_measured_replica_holds_the_kv_its_engine_leaves_after_the_weights() -> None:
    l70 = get_model("llama-2-70b")
    # 4 × 40 GB at 90 %: 144 GB, 138 GB of weights: ~6 GB of KV, ~18k tokens; the same replica
    # planned with the fleet's 2 GB per GPU reserve would hold none
    vllm = measured_kv_tokens(l70, 4, 40.0)
    assert vllm == int((144e9 - l70.weight_bytes()) // l70.kv_bytes_per_token())
    assert 17_000 < vllm < 20_000
    # DeepSpeed-FastGen keeps a fixed reserve per GPU and gives the KV the rest
    fastgen = measured_kv_tokens(l70, 4, 40.0, "Deepspeed-MII")
    assert fastgen == int(
        ((40.0 - FASTGEN_RESERVE_GB) * 4e9 - l70.weight_bytes()) // l70.kv_bytes_per_token()
    )
    assert fastgen > 2.5 * vllm


@dataclass(frozen=True, slots=True, kw_only=True)
class _HandingOver(LinearCostModel):
    hop_latency_s: float = 1e-3


def test_each_step_through_layers_split_over_gpus_pays_a_hand_over_per_gpu_boundary() -> None:
    handing = _HandingOver(per_context_token_s=1e-7)
    plain = LinearCostModel(per_context_token_s=1e-7)
    # one GPU: no hand-over; four: three per decode step (and per prompt call, pipelined)
    assert llama_bench_s(handing, 512, 512, 1) == pytest.approx(llama_bench_s(plain, 512, 512, 1))
    extra = llama_bench_s(handing, 512, 512, 4) - llama_bench_s(plain, 512, 512, 4)
    assert extra == pytest.approx(512 * 3e-3 + 3e-3 * (1 + 3) / 4, rel=1e-9)
