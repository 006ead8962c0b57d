"""Where the project finds its own files and the large real data it never copies."""

from __future__ import annotations

import os
from pathlib import Path

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
