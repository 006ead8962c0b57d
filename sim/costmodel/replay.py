"""What a measured run did, replayed on an iteration cost model.

A measured latency is only as comparable as the replay of what the benchmark made the engine do:

- **Splitwise** ``prompt_time``: one prefill iteration of ``batch`` prompts (:func:`prefill_s`);
  ``token_time``: the mean decode iteration of ``batch`` sequences (:func:`mean_decode_s`).
- **LLM-Inference-Bench, continuous-batching engines** (vLLM, TensorRT-LLM, DeepSpeed-MII,
  DeepSpeed on Gaudi): ``batch`` sequences of ``L`` tokens in and ``L`` out, the latency of the
  whole batch (:func:`e2e_s`): the prefills packed whole into iterations of at most
  ``DEFAULT_MAX_BATCHED_TOKENS`` tokens, then the decodes of the batch — in waves when its KV
  does not fit the replica's cache (:func:`kv_waves`). How many sequences run together depends
  on what the engine's scheduler admits a sequence against (:func:`kv_footprint`): TensorRT-LLM's
  default scheduler (``GUARANTEED_NO_EVICT``) reserves the blocks of the whole sequence,
  ``2·L``, before it admits it; vLLM admits on the blocks a sequence holds now and preempts when
  the cache runs out, so a sequence holds ``1.5·L`` on average over its life.
- **LLM-Inference-Bench, llama.cpp** (:func:`llama_bench_s`): the rows are ``llama-bench -pg L,L
  -b B`` runs. That is **one** sequence: ``-b`` is llama.cpp's logical batch, the number of
  prompt tokens per decode call, not a number of sequences (the rows' throughput is ``2·L`` tokens
  over the latency whatever ``B`` is). Its prompt is processed in chunks of ``B`` tokens, then
  ``L`` decode steps of that sequence follow. On several GPUs llama.cpp splits the *layers*
  among them (its default split mode): a token runs through every layer, one GPU after
  another, so a decode step costs what the whole model costs on one GPU (:func:`kernel_tp` is
  1); the prompt's chunks are submitted without waiting for each other, so they pipeline
  through the GPUs, one stage per GPU.

The replica a run was measured on holds the KV that its engine's memory fraction leaves after
the weights, on the memory of the GPUs it ran on (:func:`measured_kv_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from placement.domain.fleet import DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_MAX_BATCHED_TOKENS
from placement.domain.llm import ModelArchitecture
from sim.costmodel.base import IterationCostModel

LLAMA_CPP = "llama.cpp"
TENSORRT_LLM = "TensorRT-LLM"
DEEPSPEED_MII = "Deepspeed-MII"
# memory per GPU DeepSpeed-FastGen keeps out of its KV cache (its memory_config default: reserve)
FASTGEN_RESERVE_GB = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One measured quantity on one accelerator (seconds).

    ``batch`` is the benchmark's batch size column as measured: sequences for the
    continuous-batching engines and Splitwise, prompt tokens per decode call for llama.cpp.
    ``hbm_gb``: memory per GPU of the GPUs the run was measured on (0: the catalogue kind's)."""

    source: str  # "llm_inference_bench" or "splitwise"
    hardware: str  # catalogue kind
    framework: str
    model: str
    tp: int  # GPUs the replica spans
    phase: str  # "e2e", "prefill" or "decode"
    batch: int
    prompt: int  # input tokens per sequence
    tokens: int  # output tokens per sequence
    measured_s: float
    hbm_gb: float = 0.0  # 0: the catalogue kind's


def is_llama_bench(run: Run) -> bool:
    """A llama.cpp row of LLM-Inference-Bench: one sequence, ``batch`` prompt tokens per call."""
    return run.source == "llm_inference_bench" and run.framework == LLAMA_CPP


def kernel_tp(run: Run) -> int:
    """The tensor-parallel degree whose kernels a step of ``run`` runs: 1 when the engine splits
    the layers among the GPUs (llama.cpp), else the run's GPU count."""
    return 1 if is_llama_bench(run) else run.tp


def measured_kv_tokens(
    model: ModelArchitecture, tp: int, hbm_gb: float, framework: str | None = None
) -> int:
    """Tokens of KV a replica of ``tp`` GPUs of ``hbm_gb`` each held when measured.

    DeepSpeed-MII (FastGen) gives the KV cache all the memory but a fixed reserve per GPU
    (:data:`FASTGEN_RESERVE_GB`, its memory configuration's default). The other engines give it
    what their memory fraction (:data:`DEFAULT_GPU_MEMORY_UTILIZATION`) leaves after the weights;
    their activations are inside that fraction (vLLM profiles them into it; the run ran, so they
    fitted), so unlike a planned replica no further reserve is taken."""
    if framework == DEEPSPEED_MII:
        usable = (hbm_gb - FASTGEN_RESERVE_GB) * 1e9 * tp - model.weight_bytes()
    else:
        usable = hbm_gb * 1e9 * DEFAULT_GPU_MEMORY_UTILIZATION * tp - model.weight_bytes()
    return max(0, int(usable // model.kv_bytes_per_token()))


def kv_footprint(framework: str, length: int) -> int:
    """KV tokens a sequence of ``length`` in, ``length`` out is admitted against: the whole
    sequence for TensorRT-LLM (its scheduler guarantees a sequence never runs out of blocks),
    the mean it holds over its life (``1.5·length``) for engines that admit on what it holds now
    (vLLM and the others)."""
    if framework in (TENSORRT_LLM, DEEPSPEED_MII):
        return 2 * length
    return length + length // 2


def prefill_s(cm: IterationCostModel, batch: int, prompt: int) -> float:
    """One prefill iteration of ``batch`` prompts of ``prompt`` tokens (no cached context)."""
    return cm.iteration_s([(prompt, 0)] * batch, 0, 0)


def mean_decode_s(cm: IterationCostModel, batch: int, context: int, steps: int) -> float:
    """Mean decode iteration of ``batch`` sequences over ``steps`` steps from ``context``."""
    d0, d1 = cm.decode_attention_coeffs(batch)
    mean_context = batch * (context + (steps - 1) / 2.0)
    return cm.overhead_s + cm.linear_s(batch) + d0 + d1 * mean_context


def kv_waves(
    batch: int, length: int, kv_tokens: int | None, footprint: int | None = None
) -> list[tuple[int, int]]:
    """``(sequences, times)`` of the waves a batch of ``length``-in, ``length``-out sequences
    runs in when at most ``kv_tokens`` tokens of KV fit (``None``: all at once), each sequence
    admitted against ``footprint`` tokens (default ``1.5·length``, :func:`kv_footprint`)."""
    if kv_tokens is None:
        return [(batch, 1)]
    each = footprint if footprint is not None else length + length // 2
    together = max(1, min(batch, kv_tokens // each))
    full, rest = divmod(batch, together)
    return [(together, full), *([(rest, 1)] if rest else [])]


def e2e_s(
    cm: IterationCostModel,
    batch: int,
    length: int,
    kv_tokens: int | None = None,
    footprint: int | None = None,
) -> float:
    """A batch with input = output = ``length`` tokens: packed prefills, then the decodes, in
    waves when ``kv_tokens`` (the replica's KV cache) cannot hold it (:func:`kv_waves`)."""
    return sum(
        count * _one_wave_s(cm, size, length)
        for size, count in kv_waves(batch, length, kv_tokens, footprint)
    )


def _one_wave_s(cm: IterationCostModel, batch: int, length: int) -> float:
    per_iteration = max(1, DEFAULT_MAX_BATCHED_TOKENS // length)
    total, left = 0.0, batch
    while left > 0:
        now = min(per_iteration, left)
        total += prefill_s(cm, now, length)
        left -= now
    steps = length - 1
    if steps > 0:
        total += steps * mean_decode_s(cm, batch, length + 1, steps)
    return total


def chunked_prompt_s(cm: IterationCostModel, prompt: int, chunk: int) -> float:
    """One sequence's prompt of ``prompt`` tokens processed ``chunk`` tokens per call, each chunk
    attending to the ones before it (exact: chunk attention is affine in its context, so the
    full chunks cost as many times the mean of the first and the last)."""
    chunk = max(1, min(chunk, prompt))
    full, last = divmod(prompt, chunk)
    total = 0.0
    if full:
        first = cm.iteration_s([(chunk, 0)], 0, 0)
        final = cm.iteration_s([(chunk, chunk * (full - 1))], 0, 0)
        total += full * (first + final) / 2.0
    if last:
        total += cm.iteration_s([(last, full * chunk)], 0, 0)
    return total


def llama_bench_s(cm: IterationCostModel, chunk: int, length: int, gpus: int) -> float:
    """``llama-bench -pg length,length -b chunk`` on ``gpus`` GPUs holding the layers in turn
    (``cm``: the whole model's kernels on one GPU): the prompt in chunks, pipelined through the
    GPUs (``gpus`` stages; ``c`` chunks take ``c + gpus − 1`` stage times), then ``length``
    decode steps of the one sequence, each through every layer and handed from GPU to GPU
    (``gpus − 1`` hops of the stack's ``hop_latency_s`` when ``cm`` has one)."""
    chunk = max(1, min(chunk, length))
    chunks = -(-length // chunk)
    hops = (gpus - 1) * float(getattr(cm, "hop_latency_s", 0.0))
    prompt = chunked_prompt_s(cm, length, chunk) + chunks * hops
    pipelined = prompt * (chunks + gpus - 1) / (chunks * gpus)
    return pipelined + length * (mean_decode_s(cm, 1, length, length) + hops)


def predictor(run: Run, kv_tokens: int | None = None) -> Callable[[IterationCostModel], float]:
    """The function of a cost model that predicts ``run`` (``kv_tokens``: the replica's KV
    cache, which limits how many sequences of an end-to-end batch run together)."""
    if is_llama_bench(run):
        return partial(llama_bench_s, chunk=run.batch, length=run.prompt, gpus=run.tp)
    if run.phase == "e2e":
        return partial(
            e2e_s,
            batch=run.batch,
            length=run.prompt,
            kv_tokens=kv_tokens,
            footprint=kv_footprint(run.framework, run.prompt),
        )
    if run.phase == "prefill":
        return partial(prefill_s, batch=run.batch, prompt=run.prompt)
    return partial(mean_decode_s, batch=run.batch, context=run.prompt, steps=run.tokens)
