"""Model architectures, described by their shapes (what the cost model needs)."""

from __future__ import annotations

from dataclasses import dataclass

from placement.errors import InputError, UnknownModel


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelArchitecture:
    """A decoder-only transformer. MoE models set ``num_experts`` and ``experts_per_token``."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    # the longest sequence (prompt + output) the served model takes: vLLM's max_model_len
    context_tokens: int = 8192
    dtype_bytes: int = 2
    num_experts: int = 0
    experts_per_token: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def params(self) -> float:
        """Parameter count (embeddings included)."""
        attn = self.hidden * self.head_dim * (self.heads + 2 * self.kv_heads)
        attn += self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate * max(1, self.num_experts)
        router = self.hidden * self.num_experts
        return float(self.layers * (attn + mlp + router) + 2 * self.vocab * self.hidden)

    @property
    def active_params(self) -> float:
        """Parameters touched per token (MoE: only the routed experts)."""
        if not self.is_moe:
            return self.params
        inactive = 3 * self.hidden * self.intermediate * (self.num_experts - self.experts_per_token)
        return self.params - self.layers * inactive

    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies across all layers (whole model, before TP)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes


CATALOGUE: dict[str, ModelArchitecture] = {
    m.name: m
    for m in (
        ModelArchitecture(
            name="llama-3-8b",
            context_tokens=131072,
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            head_dim=128,
            intermediate=14336,
            vocab=128256,
        ),
        ModelArchitecture(
            name="llama-2-70b",
            context_tokens=4096,
            layers=80,
            hidden=8192,
            heads=64,
            kv_heads=8,
            head_dim=128,
            intermediate=28672,
            vocab=32000,
        ),
        ModelArchitecture(
            name="qwen2.5-32b",
            context_tokens=32768,
            layers=64,
            hidden=5120,
            heads=40,
            kv_heads=8,
            head_dim=128,
            intermediate=27648,
            vocab=152064,
        ),
        ModelArchitecture(
            name="mixtral-8x7b",
            context_tokens=32768,
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            head_dim=128,
            intermediate=14336,
            vocab=32000,
            num_experts=8,
            experts_per_token=2,
        ),
        ModelArchitecture(
            name="qwen3-30b-a3b",
            context_tokens=32768,
            layers=48,
            hidden=2048,
            heads=32,
            kv_heads=4,
            head_dim=128,
            intermediate=768,
            vocab=151936,
            num_experts=128,
            experts_per_token=8,
        ),
    )
}

_ALIASES = {
    "meta-llama/meta-llama-3-8b": "llama-3-8b",
    "meta-llama/llama-3.1-8b": "llama-3-8b",
    "llama3-8b": "llama-3-8b",
    "llama-3.1-8b": "llama-3-8b",
    "llama2-70b": "llama-2-70b",
    "meta-llama/llama-2-70b-hf": "llama-2-70b",
    "qwen/qwen2.5-32b": "qwen2.5-32b",
    "qwen2.5-32b-instruct": "qwen2.5-32b",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b",
    "qwen/qwen3-30b-a3b": "qwen3-30b-a3b",
}


def check_fits_context(
    model: ModelArchitecture,
    input_tokens: int,
    max_output_tokens: int,
    *,
    source: str | None = None,
) -> None:
    """Refuse a request whose prompt plus requested output cannot fit the model's context
    window (no replica of it could serve the request, so it must never reach demand)."""
    total = input_tokens + max_output_tokens
    if total > model.context_tokens:
        raise InputError(
            f"{input_tokens} prompt tokens + {max_output_tokens} output tokens = {total} tokens "
            f"exceed the context window of {model.name}",
            source=source,
            field="input_tokens" if input_tokens > model.context_tokens else "max_output_tokens",
            expected=f"prompt + output ≤ {model.context_tokens} tokens",
        )


def get_model(
    name: str, *, source: str | None = None, field: str | None = None
) -> ModelArchitecture:
    """Look a model architecture up by name or a common alias (case-insensitive)."""
    key = name.lower()
    if key in CATALOGUE:
        return CATALOGUE[key]
    if key in _ALIASES:
        return CATALOGUE[_ALIASES[key]]
    raise UnknownModel(
        f"unknown model '{name}'",
        source=source,
        field=field,
        expected="one of " + ", ".join(sorted(CATALOGUE)),
    )
