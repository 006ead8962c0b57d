"""Catalogue folders: accelerator datasheets and model architectures as YAML, read and checked.

A catalogue folder holds any of:

- ``accelerators.yaml`` (``accelerators: [entry, …]``) and/or ``accelerators/*.yaml`` (one entry
  per file, or the same list form);
- ``models.yaml`` (``models: [entry, …]``) and/or ``models/*.yaml``;
- operator profiles in AIConfigurator's layout (``<profile>/gemm/vllm/<version>/…``), found by
  :mod:`sim.costmodel.profiles`, and measurement files the accelerator entries name.

The shipped catalogue is ``data/catalogue``; the folders of ``PLACEMENT_PROFILES``
(:data:`os.pathsep`-separated) and of ``--profiles`` are read after it, in order; an entry of a
later folder replaces an earlier entry of the same name. Every error names the file and the
field (``accelerators.2.hbm_tbps``) and what was expected.

This module only reads and validates; :mod:`placement.domain.accelerators` and
:mod:`placement.domain.llm` turn the entries into their types and register them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from placement.errors import InputError
from placement.paths import repo_root

PROFILES_ENV = "PLACEMENT_PROFILES"
SHARED_PREFIX = "shared:"
MeasurementColumns = Literal["llm_inference_bench", "splitwise"]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MeasurementEntry(_Entry):
    """A file of end-to-end measurements and which of its rows are this accelerator's."""

    file: str = Field(min_length=1)
    columns: MeasurementColumns
    hardware: str = Field(min_length=1)
    framework: str | None = None
    # memory per GPU of the GPUs the rows were measured on, when not the kind's (e.g. the 40 GB
    # variant of an 80 GB kind): the KV cache the measured replicas held
    hbm_gb: float | None = Field(default=None, gt=0)


class AcceleratorEntry(_Entry):
    kind: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    dense_bf16_tflops: float = Field(gt=0)
    dense_fp8_tflops: float | None = Field(default=None, gt=0)
    hbm_gb: float = Field(gt=0)
    hbm_tbps: float = Field(gt=0)
    interconnect_gbps: float = Field(default=450.0, gt=0)
    boost_clock_ghz: float | None = Field(default=None, gt=0, le=10)
    compute_units: int | None = Field(default=None, gt=0, le=100_000)
    cost_per_hour: float = Field(ge=0)
    profile: str | None = None
    measurements: tuple[MeasurementEntry, ...] = ()


class ModelEntry(_Entry):
    name: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate: int = Field(ge=1)
    vocab: int = Field(ge=1)
    context_tokens: int = Field(default=8192, ge=1)
    dtype_bytes: int = Field(default=2, ge=1, le=8)
    num_experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    task: Literal["generate", "embed", "classify"] = "generate"

    @model_validator(mode="after")
    def _experts(self) -> ModelEntry:
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError("an MoE model routes each token to 1 … num_experts experts")
        if self.heads % self.kv_heads:
            raise ValueError("heads must be a multiple of kv_heads")
        return self


class _AcceleratorFile(_Entry):
    accelerators: list[AcceleratorEntry]


class _ModelFile(_Entry):
    models: list[ModelEntry]


T = TypeVar("T")
E = TypeVar("E", bound=_Entry)


@dataclass(frozen=True, slots=True)
class Located(Generic[T]):
    """An entry and the file it came from (relative paths in it are taken from that folder)."""

    entry: T
    source: Path


def shipped_folder() -> Path:
    """The catalogue the project ships: ``<repo>/data/catalogue``."""
    return repo_root() / "data" / "catalogue"


def env_folders() -> tuple[Path, ...]:
    """The folders of ``$PLACEMENT_PROFILES`` (``os.pathsep``-separated, empty parts skipped)."""
    raw = os.environ.get(PROFILES_ENV, "")
    return tuple(Path(part) for part in raw.split(os.pathsep) if part.strip())


def check_folder(folder: Path, *, field: str = PROFILES_ENV) -> Path:
    """``folder`` if it is a directory, else an InputError naming the setting it came from."""
    if not folder.is_dir():
        raise InputError(
            f"profiles folder {folder} is not a directory",
            field=field,
            expected="folders holding accelerators.yaml, models.yaml and/or operator profiles",
        )
    return folder


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise InputError("not valid YAML", source=str(path), line=line) from None


def _validation_error(exc: ValidationError, path: Path) -> InputError:
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in err["loc"])
    msg = "unknown field (a typo?)" if err["type"] == "extra_forbidden" else err["msg"]
    return InputError(msg, source=str(path), field=loc)


def _entries(path: Path, key: str, entry_type: type[E], file_type: type[_Entry]) -> list[E]:
    """Entries of one YAML file: ``{key: [entry, …]}`` or a single entry mapping."""
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise InputError(
            "a catalogue file must be a mapping",
            source=str(path),
            expected=f"'{key}: [...]' or one entry",
        )
    try:
        if key in raw:
            parsed = file_type.model_validate(raw)
            return list(getattr(parsed, key))
        return [entry_type.model_validate(raw)]
    except ValidationError as exc:
        raise _validation_error(exc, path) from None


def _files(folder: Path, key: str) -> list[Path]:
    single = folder / f"{key}.yaml"
    many = folder / key
    files = [single] if single.is_file() else []
    if many.is_dir():
        files += sorted(p for p in many.iterdir() if p.suffix in (".yaml", ".yml"))
    return files


def read_accelerators(folder: Path) -> list[Located[AcceleratorEntry]]:
    """Accelerator entries of one catalogue folder, in file order."""
    return [
        Located(entry, path)
        for path in _files(folder, "accelerators")
        for entry in _entries(path, "accelerators", AcceleratorEntry, _AcceleratorFile)
    ]


def read_models(folder: Path) -> list[Located[ModelEntry]]:
    """Model entries of one catalogue folder, in file order."""
    return [
        Located(entry, path)
        for path in _files(folder, "models")
        for entry in _entries(path, "models", ModelEntry, _ModelFile)
    ]


def resolve_file(name: str, source: Path) -> str:
    """A file named in a catalogue entry: ``shared:<path>`` stays symbolic (resolved when read,
    so the shared data folder may move); anything else is made absolute from ``source``'s
    folder."""
    if name.startswith(SHARED_PREFIX):
        return name
    path = Path(name)
    return str(path if path.is_absolute() else (source.parent / path).resolve())


def resolve_profile(profile: str | None, source: Path) -> str | None:
    """A profile name stays a name (searched in every profiles folder); a path (it has a
    slash) is made absolute from ``source``'s folder."""
    if profile is None or ("/" not in profile and os.sep not in profile):
        return profile
    path = Path(profile)
    return str(path if path.is_absolute() else (source.parent / path).resolve())


def check_unique(names: Sequence[str], source: Path, key: str) -> None:
    """Refuse a file that defines one name twice."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name.lower() in seen:
            raise InputError(f"'{name}' is defined twice", source=str(source), field=f"{key}.{i}")
        seen.add(name.lower())
