"""Catalogue folders for tests: a new accelerator and a new model written as YAML, and a guard
that puts the process-wide catalogue back as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from placement.domain import accelerators, catalogue, llm
from placement.domain.catalogue_files import PROFILES_ENV

NEW_ACCELERATOR = """\
accelerators:
  - kind: MI355X
    aliases: [mi355x, amd-mi355x]
    dense_bf16_tflops: 1307
    dense_fp8_tflops: 2615
    hbm_gb: 192
    hbm_tbps: 5.3
    interconnect_gbps: 448
    cost_per_hour: 3.5
"""

NEW_MODEL = """\
name: tiny-llama-1b
aliases: [acme/tiny-llama-1b]
context_tokens: 32768
layers: 16
hidden: 2048
heads: 32
kv_heads: 8
head_dim: 64
intermediate: 8192
vocab: 128256
"""


def write_catalogue(folder: Path, *, accelerators_yaml: str = NEW_ACCELERATOR) -> Path:
    """``folder`` with accelerators.yaml and models/tiny.yaml (the shapes of Llama-3.2-1B)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "accelerators.yaml").write_text(accelerators_yaml)
    (folder / "models").mkdir(exist_ok=True)
    (folder / "models" / "tiny.yaml").write_text(NEW_MODEL)
    return folder


@pytest.fixture
def restore_catalogue() -> Iterator[None]:
    """Whatever a test registers (``--profiles`` included) is gone afterwards."""
    env = os.environ.get(PROFILES_ENV)
    saved = (
        dict(accelerators.CATALOGUE),
        dict(accelerators._ALIASES),
        dict(llm.CATALOGUE),
        dict(llm._ALIASES),
        list(catalogue._ADDED),
    )
    yield
    for target, value in zip(
        (accelerators.CATALOGUE, accelerators._ALIASES, llm.CATALOGUE, llm._ALIASES),
        saved[:4],
        strict=True,
    ):
        target.clear()
        target.update(value)  # type: ignore[attr-defined]
    catalogue._ADDED[:] = saved[4]
    if env is None:
        os.environ.pop(PROFILES_ENV, None)
    else:
        os.environ[PROFILES_ENV] = env
