"""Accelerator kinds and their public datasheet figures (the roofline prior's inputs)."""

from __future__ import annotations

from dataclasses import dataclass

from placement.errors import UnknownAccelerator


@dataclass(frozen=True, slots=True, kw_only=True)
class Accelerator:
    """One accelerator kind.

    ``profile`` names the folder of measured operator tables under
    ``profiles/aiconfigurator`` when there is one; kinds without it fall back to the roofline.
    """

    kind: str
    dense_bf16_tflops: float
    hbm_gb: float
    hbm_tbps: float
    cost_per_hour: float
    profile: str | None = None
    # intra-node interconnect bandwidth per GPU, GB/s (for the all-reduce roofline)
    interconnect_gbps: float = 450.0


CATALOGUE: dict[str, Accelerator] = {
    a.kind: a
    for a in (
        Accelerator(
            kind="H100-SXM",
            dense_bf16_tflops=989,
            hbm_gb=80,
            hbm_tbps=3.35,
            cost_per_hour=4.0,
            profile="h100_sxm",
            interconnect_gbps=450,
        ),
        Accelerator(
            kind="H200",
            dense_bf16_tflops=989,
            hbm_gb=141,
            hbm_tbps=4.8,
            cost_per_hour=5.0,
            interconnect_gbps=450,
        ),
        Accelerator(
            kind="A100-80G",
            dense_bf16_tflops=312,
            hbm_gb=80,
            hbm_tbps=2.04,
            cost_per_hour=2.0,
            profile="a100_sxm",
            interconnect_gbps=300,
        ),
        Accelerator(
            kind="L40S",
            dense_bf16_tflops=362,
            hbm_gb=48,
            hbm_tbps=0.864,
            cost_per_hour=1.2,
            profile="l40s",
            interconnect_gbps=32,
        ),
        Accelerator(
            kind="L4",
            dense_bf16_tflops=121,
            hbm_gb=24,
            hbm_tbps=0.3,
            cost_per_hour=0.7,
            interconnect_gbps=32,
        ),
        Accelerator(
            kind="B200",
            dense_bf16_tflops=2250,
            hbm_gb=180,
            hbm_tbps=8.0,
            cost_per_hour=7.0,
            profile="b200_sxm",
            interconnect_gbps=900,
        ),
        Accelerator(
            kind="TPU-v5e",
            dense_bf16_tflops=197,
            hbm_gb=16,
            hbm_tbps=0.82,
            cost_per_hour=1.2,
            interconnect_gbps=200,
        ),
        Accelerator(
            kind="Trainium2",
            dense_bf16_tflops=667,
            hbm_gb=96,
            hbm_tbps=2.9,
            cost_per_hour=2.5,
            interconnect_gbps=320,
        ),
    )
}

_ALIASES = {
    "h100": "H100-SXM",
    "h100-sxm": "H100-SXM",
    "h100_sxm": "H100-SXM",
    "h100-80gb": "H100-SXM",
    "a100": "A100-80G",
    "a100-80g": "A100-80G",
    "a100_sxm": "A100-80G",
    "a100-80gb": "A100-80G",
    "l40s": "L40S",
    "l4": "L4",
    "b200": "B200",
    "b200_sxm": "B200",
    "h200": "H200",
    "tpu-v5e": "TPU-v5e",
    "tpu_v5e": "TPU-v5e",
    "trainium2": "Trainium2",
    "trn2": "Trainium2",
}


def get_accelerator(
    kind: str, *, source: str | None = None, field: str | None = None
) -> Accelerator:
    """Look an accelerator up by kind or a common alias (case-insensitive)."""
    if kind in CATALOGUE:
        return CATALOGUE[kind]
    canonical = _ALIASES.get(kind.lower())
    if canonical is None:
        raise UnknownAccelerator(
            f"unknown accelerator '{kind}'",
            source=source,
            field=field,
            expected="one of " + ", ".join(sorted(CATALOGUE)),
        )
    return CATALOGUE[canonical]


def accelerator_names() -> tuple[str, ...]:
    """Every name :func:`get_accelerator` knows as spelt here: the kinds, then their aliases."""
    return (*sorted(CATALOGUE), *sorted(set(_ALIASES) - set(CATALOGUE)))
