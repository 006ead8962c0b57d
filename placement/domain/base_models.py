"""What it costs a replica to change the base model it serves.

A swap drains the replica (it admits nothing new; what runs finishes), then loads the new
weights and starts the engine again: ``weights_bytes / weights_load_gbps + startup_s``, with
the KV cache empty and no LoRA adapter resident. Stated rather than measured, from vLLM's own
start-up logs on one H100 with local NVMe: "Loading model weights took 14.99 GB" in ~5 s for
Llama-3-8B (~3 GB/s of safetensors), and "init engine (profile, create kv cache, warmup
model) took" 15–30 s with CUDA graphs captured (torch.compile adds more; vLLM's sleep mode
would make a wake-up ~1 s, but only for weights kept in host memory, which this does not
assume).
"""

from __future__ import annotations

from placement.domain.llm import ModelArchitecture

DEFAULT_WEIGHTS_LOAD_GBPS = 3.0  # safetensors from local NVMe, GB/s
DEFAULT_STARTUP_S = 25.0  # profiling, KV cache allocation, CUDA graph capture
#: A drain waits at most this long for running requests; the rest are sent elsewhere.
DRAIN_LIMIT_S = 30.0


def swap_load_s(model: ModelArchitecture, *, gbps: float, startup_s: float) -> float:
    """Seconds from a drained replica to one serving ``model``: its weights, then start-up."""
    return model.weight_bytes() / (gbps * 1e9) + startup_s
