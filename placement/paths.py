"""Where the project finds its own files and the large real data it never copies."""

from __future__ import annotations

import os
from pathlib import Path

from placement.errors import InputError

SHARED_DATA_ENV = "PLACEMENT_SHARED_DATA"


def repo_root() -> Path:
    """The repository's root directory (the one holding ``placement/``)."""
    return Path(__file__).resolve().parent.parent


def shared_data() -> Path:
    """The read-only real data: ``$PLACEMENT_SHARED_DATA``, else ``<repo root>/../shared/data``."""
    configured = os.environ.get(SHARED_DATA_ENV)
    if configured:
        return Path(configured)
    return repo_root().parent / "shared" / "data"


def shared_file(relative: str | Path) -> Path:
    """``shared_data() / relative``, which must exist: otherwise an InputError that names the
    missing path and the setting that points elsewhere (a clone not beside ``../shared``)."""
    path = shared_data() / relative
    if not path.exists():
        base = shared_data()
        where = "is not there" if not base.exists() else f"has no {relative}"
        raise InputError(
            f"the shared data folder {base} {where}",
            field=SHARED_DATA_ENV,
            expected="the folder holding the real traces and profiles (traces/, tenants/, "
            "profiles/); set PLACEMENT_SHARED_DATA to it",
        )
    return path
