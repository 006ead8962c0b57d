"""Model architectures, described by their shapes (what the cost model needs).

The catalogue is data: ``data/catalogue/models.yaml`` (shipped), then every folder of
``PLACEMENT_PROFILES`` and of ``--profiles`` (format: :mod:`placement.domain.catalogue_files`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from placement.domain.catalogue_files import (
    Located,
    ModelEntry,
    check_folder,
    check_unique,
    env_folders,
    read_models,
    shipped_folder,
)
from placement.errors import InputError, UnknownModel


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelArchitecture:
    """A transformer. MoE models set ``num_experts`` and ``experts_per_token``; ``task`` is
    ``generate`` (a decoder served for completions), or a pooling model (one forward pass over
    the prompt, no decode): ``embed`` (``/v1/embeddings``) or ``classify`` (``/classify``)."""

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
    task: Literal["generate", "embed", "classify"] = "generate"

    @property
    def pooling(self) -> bool:
        """A model served by pooling (embeddings, classification), not by generation."""
        return self.task != "generate"

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


CATALOGUE: dict[str, ModelArchitecture] = {}
_ALIASES: dict[str, str] = {}
# an unreadable PLACEMENT_PROFILES folder, reported by the first lookup (see accelerators.py)
_PENDING: list[InputError] = []


def model_from_entry(entry: ModelEntry) -> ModelArchitecture:
    """The :class:`ModelArchitecture` of a catalogue entry (names are kept lower-case)."""
    return ModelArchitecture(
        name=entry.name.lower(),
        layers=entry.layers,
        hidden=entry.hidden,
        heads=entry.heads,
        kv_heads=entry.kv_heads,
        head_dim=entry.head_dim,
        intermediate=entry.intermediate,
        vocab=entry.vocab,
        context_tokens=entry.context_tokens,
        dtype_bytes=entry.dtype_bytes,
        num_experts=entry.num_experts,
        experts_per_token=entry.experts_per_token,
        task=entry.task,
    )


def register_models(entries: Iterable[Located[ModelEntry]]) -> list[ModelArchitecture]:
    """Add (or replace, by name) catalogue entries; returns the models registered."""
    entries = list(entries)
    by_file: dict[str, list[str]] = {}
    for located in entries:
        by_file.setdefault(str(located.source), []).append(located.entry.name)
    for located in entries:
        check_unique(by_file[str(located.source)], located.source, "models")
    added: list[ModelArchitecture] = []
    for located in entries:
        model = model_from_entry(located.entry)
        CATALOGUE[model.name] = model
        for alias in located.entry.aliases:
            _ALIASES[alias.lower()] = model.name
        added.append(model)
    return added


def _load() -> None:
    register_models(read_models(shipped_folder()))
    for folder in env_folders():
        try:
            register_models(read_models(check_folder(folder)))
        except InputError as exc:
            _PENDING.append(exc)


_load()


TEXT_CHARS_PER_TOKEN = 4  # a prompt known only as text: a rough English average


def text_token_estimate(chars: int, model_name: str, max_output_tokens: int) -> int:
    """Prompt tokens of a text of ``chars`` characters when nobody tokenized it: chars / 4, but
    never more than the model's context window leaves beside the output. The estimate is for
    routing (queued work, predicted TTFT); it must not get a prompt refused for length that may
    well fit (text of long words has fewer tokens: the Mooncake slice's prompts come out 1.4×
    over), so refusals on length rest on a lower bound instead (the gateway: chars / 8)."""
    estimate = chars // TEXT_CHARS_PER_TOKEN
    try:
        context = get_model(model_name).context_tokens
    except InputError:
        return estimate  # a model outside the catalogue: its replicas judge the length
    return max(0, min(estimate, context - max_output_tokens))


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
    if _PENDING:
        raise _PENDING[0]
    key = name.lower()
    if key in CATALOGUE:
        return CATALOGUE[key]
    if _ALIASES.get(key) in CATALOGUE:
        return CATALOGUE[_ALIASES[key]]
    raise UnknownModel(
        f"unknown model '{name}'",
        source=source,
        field=field,
        expected="one of "
        + ", ".join(sorted(CATALOGUE))
        + " (or add it: a models.yaml in a PLACEMENT_PROFILES folder)",
    )
