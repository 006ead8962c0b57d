"""Model architectures: the context window every request must fit."""

from __future__ import annotations

import pytest

from placement.domain.llm import check_fits_context, get_model
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
