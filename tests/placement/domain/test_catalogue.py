"""The catalogue as data: shipped YAML, folders that add kinds and models, errors that name the
file and field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from catalogue_builders import NEW_ACCELERATOR, restore_catalogue, write_catalogue

from models.capacity import Slo, WorkloadMix, capacity_at_slo, replica_kind
from placement.domain.accelerators import CATALOGUE, get_accelerator
from placement.domain.catalogue import add_profile_folders, parse_folders, profile_folders
from placement.domain.fleet import fleet_from_dict
from placement.domain.llm import get_model
from placement.errors import InputError, UnknownAccelerator

__all__ = ["restore_catalogue"]
ROOT = Path(__file__).resolve().parents[3]


def test_shipped_catalogue_keeps_every_kind_and_alias() -> None:
    assert set(CATALOGUE) >= {
        "H100-SXM", "H200", "A100-80G", "L40S", "L4", "B200", "TPU-v5e", "Trainium2"
    }  # fmt: skip
    assert get_accelerator("h100_sxm").profile == "h100_sxm"
    assert get_accelerator("TRN2").kind == "Trainium2"
    assert get_accelerator("B200").dense_fp8_tflops == 4500
    assert get_model("meta-llama/Llama-2-70b-hf").name == "llama-2-70b"
    assert get_model("mixtral-8x7b").is_moe
    with pytest.raises(UnknownAccelerator, match="PLACEMENT_PROFILES"):
        get_accelerator("MI355X")


@pytest.mark.usefixtures("restore_catalogue")
def test_a_folder_adds_an_accelerator_and_a_model_used_by_a_fleet_and_capacity(
    tmp_path: Path,
) -> None:
    add_profile_folders([write_catalogue(tmp_path / "mine")])
    assert profile_folders()[-1] == (tmp_path / "mine").resolve()
    fleet = fleet_from_dict(
        {
            "name": "new",
            "replicas": [
                {
                    "kind": "mi",
                    "accelerator": "amd-mi355x",
                    "count": 2,
                    "model": "acme/tiny-llama-1b",
                },
                {"kind": "l4", "accelerator": "L4", "count": 1, "model": "tiny-llama-1b"},
            ],
        }
    )
    mi = fleet.replicas[0]
    assert (mi.accelerator.kind, mi.model.name, mi.cost_per_hour) == (
        "MI355X",
        "tiny-llama-1b",
        3.5,
    )
    assert mi.kv_capacity_tokens > fleet.replicas[2].kv_capacity_tokens
    mix, slo = WorkloadMix(mean_input_tokens=1000, output_tokens=200), Slo(1.0, 0.05)
    on_mi300x = capacity_at_slo(replica_kind("MI355X", "tiny-llama-1b", 1), mix, slo)
    on_l4 = capacity_at_slo(replica_kind("L4", "tiny-llama-1b", 1), mix, slo)
    assert on_mi300x > 3 * on_l4 > 0


@pytest.mark.usefixtures("restore_catalogue")
def test_a_later_folder_replaces_an_entry_of_the_same_kind(tmp_path: Path) -> None:
    cheaper = NEW_ACCELERATOR.replace("kind: MI355X", "kind: L4").replace(
        "[mi355x, amd-mi355x]", "[]"
    )
    add_profile_folders([write_catalogue(tmp_path / "l4", accelerators_yaml=cheaper)])
    assert get_accelerator("l4").hbm_gb == 192


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: 10\n    hbm_gb: 8\n    cost_per_hour: 1\n", "accelerators.0.hbm_tbps"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: -1\n    hbm_gb: 8\n    hbm_tbps: 1\n    cost_per_hour: 1\n", "accelerators.0.dense_bf16_tflops"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    boost_clock_ghz: 0\n    cost_per_hour: 1\n", "accelerators.0.boost_clock_ghz"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    compute_units: 0\n    cost_per_hour: 1\n", "accelerators.0.compute_units"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflop: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    cost_per_hour: 1\n", "accelerators.0.dense_bf16_tflop"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    cost_per_hour: 1\n    measurements: [{file: a.csv, columns: mlperf, hardware: X}]\n", "accelerators.0.measurements.0.columns"),
        ("accelerators:\n  - kind: X\n    dense_bf16_tflops: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    cost_per_hour: 1\n  - kind: x\n    dense_bf16_tflops: 1\n    hbm_gb: 8\n    hbm_tbps: 1\n    cost_per_hour: 1\n", "accelerators.1"),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("restore_catalogue")
def test_bad_entries_name_the_file_and_the_field(tmp_path: Path, text: str, field: str) -> None:
    (tmp_path / "accelerators.yaml").write_text(text)
    with pytest.raises(InputError, match=rf"accelerators\.yaml.*field '{field}'") as err:
        add_profile_folders([tmp_path])
    assert "X" not in CATALOGUE and err.value.field == field


@pytest.mark.usefixtures("restore_catalogue")
def test_bad_model_and_bad_yaml_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "models.yaml").write_text(
        "models:\n  - {name: m, layers: 2, hidden: 8, heads: 3, kv_heads: 2, head_dim: 4, intermediate: 8, vocab: 10}\n"
    )
    with pytest.raises(InputError, match=r"models\.yaml.*field 'models\.0'.*multiple of kv_heads"):
        add_profile_folders([tmp_path])
    (tmp_path / "models.yaml").write_text("models: [\n")
    with pytest.raises(InputError, match=r"models\.yaml:\d+: not valid YAML"):
        add_profile_folders([tmp_path])
    with pytest.raises(InputError, match=r"field '--profiles'.*not a directory"):
        add_profile_folders([tmp_path / "nope"])


def test_profiles_value_splits_on_the_path_separator() -> None:
    assert parse_folders(f"a{os.pathsep}{os.pathsep}b") == [Path("a"), Path("b")]
    assert parse_folders(None) == []


def _python(code: str, env_folders: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLACEMENT_PROFILES": env_folders, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_environment_setting_reaches_a_fresh_process(tmp_path: Path) -> None:
    folder = write_catalogue(tmp_path / "env")
    code = (
        "from models.capacity import Slo, WorkloadMix, capacity_at_slo, replica_kind\n"
        "kind = replica_kind('MI355X', 'acme/tiny-llama-1b', 1)\n"
        "print(capacity_at_slo(kind, WorkloadMix(mean_input_tokens=1000, output_tokens=200),"
        " Slo(1.0, 0.05)))\n"
    )
    done = _python(code, f"{tmp_path / 'missing'}{os.pathsep}{folder}")
    assert done.returncode != 0 and "missing is not a directory" in done.stderr
    done = _python(code, str(folder))
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) > 1.0
