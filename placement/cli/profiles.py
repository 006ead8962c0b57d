"""``--profiles``: catalogue and profile folders a command adds to the search path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from placement.domain.catalogue import add_profile_folders, parse_folders
from placement.domain.catalogue_files import PROFILES_ENV

ProfilesOption = Annotated[
    str | None,
    typer.Option(
        "--profiles",
        help="folders (':'-separated) of accelerators.yaml, models.yaml and operator profiles "
        "to search besides the shipped catalogue (also: PLACEMENT_PROFILES)",
    ),
]


def use_profiles(value: str | None) -> list[Path]:
    """Add the folders to the catalogue here and, through ``PLACEMENT_PROFILES``, in every
    process this one starts (Dask workers); InputError naming ``--profiles`` if one is bad."""
    folders = parse_folders(value)
    if not folders:
        return []
    add_profile_folders(folders)
    resolved = [str(f.resolve()) for f in folders]
    current = [p for p in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if p]
    added = [p for p in resolved if p not in current]
    os.environ[PROFILES_ENV] = os.pathsep.join([*current, *added])
    return folders
