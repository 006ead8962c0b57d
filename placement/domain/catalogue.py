"""The folders the catalogue and the operator profiles are searched in, and adding more.

Search order: the shipped ``data/catalogue``, the folders of ``PLACEMENT_PROFILES`` (read when
:mod:`placement.domain.accelerators` is first imported), then those given to
:func:`add_profile_folders` (the ``--profiles`` flag). A later folder's entry replaces an earlier
entry of the same name. Operator profiles are searched in the same folders, latest first, then
in ``<shared data>/profiles/aiconfigurator`` (see :func:`sim.costmodel.profiles.find_profile`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from placement.domain.accelerators import register_accelerators
from placement.domain.catalogue_files import (
    check_folder,
    env_folders,
    read_accelerators,
    read_models,
    shipped_folder,
)
from placement.domain.llm import register_models

_ADDED: list[Path] = []


def add_profile_folders(folders: Iterable[Path | str], *, field: str = "--profiles") -> None:
    """Read each folder's accelerators and models into the catalogue and search its operator
    profiles; an unreadable folder or entry is an InputError naming the file and field."""
    for raw in folders:
        folder = check_folder(Path(raw), field=field).resolve()
        if folder in _ADDED:
            continue
        register_accelerators(read_accelerators(folder))
        register_models(read_models(folder))
        _ADDED.append(folder)


def profile_folders() -> tuple[Path, ...]:
    """Every catalogue folder in effect, in search order (shipped, environment, added)."""
    env = tuple(f for f in env_folders() if f.is_dir())
    return (shipped_folder(), *env, *_ADDED)


def parse_folders(value: str | None) -> list[Path]:
    """A ``--profiles`` value: folders separated by the OS path separator (``:`` on Linux)."""
    if not value:
        return []
    return [Path(part) for part in value.split(os.pathsep) if part.strip()]
