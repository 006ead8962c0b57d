"""Model architectures: the context window every request must fit."""

from __future__ import annotations

import pytest

from placement.domain.llm import check_fits_context, get_model, text_token_estimate
from placement.errors import InputError


@pytest.mark.parametrize(
    ("model", "prompt", "output", "field"),
    [
        ("llama-2-70b", 4000, 96, None),
        ("llama-2-70b", 4000, 97, "max_output_tokens"),
        ("llama-2-70b", 9_000_000, 1, "input_tokens"),
        ("llama-3-8b", 131_000, 72, None),
        ("qwen2.5-32b", 32_768, 1, "max_output_tokens"),
    ],
)
def test_requests_must_fit_the_context_window(
    model: str, prompt: int, output: int, field: str | None
) -> None:
    arch = get_model(model)
    if field is None:
        check_fits_context(arch, prompt, output)
        return
    with pytest.raises(InputError) as err:
        check_fits_context(arch, prompt, output)
    assert err.value.field == field
    assert str(arch.context_tokens) in str(err.value)


def test_a_text_estimate_never_exceeds_what_the_context_leaves() -> None:
    context = get_model("llama-3-8b").context_tokens
    assert text_token_estimate(4000, "llama-3-8b", 100) == 1000  # chars / 4
    # long words: chars / 4 overshoots the window, the prompt may still fit; no refusal follows
    capped = text_token_estimate(4 * context + 400, "llama-3-8b", 256)
    assert capped == context - 256
    check_fits_context(get_model("llama-3-8b"), capped, 256)
    assert text_token_estimate(4 * context, "a-model-outside-the-catalogue", 10) == context
