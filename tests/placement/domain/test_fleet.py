from __future__ import annotations

from pathlib import Path

import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import kv_capacity_tokens, load_fleet
from placement.domain.llm import get_model
from placement.errors import InputError, UnknownAccelerator

FLEETS = Path(__file__).resolve().parents[3] / "data" / "fleets"


@pytest.mark.parametrize("name", ["h100x8.yaml", "hetero.yaml"])
def test_shipped_fleets_load(name):
    fleet = load_fleet(FLEETS / name)
    assert fleet.replicas and all(r.kv_capacity_tokens > 100_000 for r in fleet.replicas)
    assert len({r.id for r in fleet.replicas}) == len(fleet.replicas)


def test_kv_capacity_follows_memory_minus_weights():
    h100 = get_accelerator("H100-SXM")
    model = get_model("llama-3-8b")
    # 80 GB·0.9 − 16 GB weights − 2 GB reserve ≈ 54 GB at 128 KiB per token
    assert kv_capacity_tokens(h100, model, 1, 0.9) == pytest.approx(54e9 / 131072, rel=0.02)
    assert kv_capacity_tokens(h100, model, 2, 0.9) > 2 * kv_capacity_tokens(h100, model, 1, 0.9)


@pytest.mark.parametrize(
    ("text", "field", "exc"),
    [
        (
            "name: x\nreplicas:\n  - kind: a\n    accelerator: H900\n    count: 1\n    model: llama-3-8b\n",
            "replicas.0.accelerator",
            UnknownAccelerator,
        ),
        (
            "name: x\nreplicas:\n  - kind: a\n    accelerator: H100\n    cuont: 1\n    model: llama-3-8b\n",
            "replicas.0.cuont",
            InputError,
        ),
        (
            "name: x\nreplicas:\n  - kind: a\n    accelerator: H100\n    count: 0\n    model: llama-3-8b\n",
            "replicas.0.count",
            InputError,
        ),
        (
            "name: x\nreplicas:\n  - kind: a\n    accelerator: L4\n    count: 1\n    model: llama-2-70b\n",
            "replicas.0.tp",
            InputError,
        ),
        ("name: x\nreplicas: []\n", "replicas", InputError),
    ],
)
def test_bad_fleet_files_name_file_and_field(tmp_path, text, field, exc):
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    with pytest.raises(exc) as err:
        load_fleet(p)
    assert err.value.field == field
    assert str(p) in str(err.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text("name: x\nreplicas:\n  - kind: [a\n")
    with pytest.raises(InputError) as err:
        load_fleet(p)
    assert err.value.line is not None
