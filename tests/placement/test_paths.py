"""Where the project finds the shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.paths import SHARED_DATA_ENV, repo_root, shared_data


def test_repo_root_holds_the_package() -> None:
    assert (repo_root() / "placement" / "paths.py").is_file()


def test_shared_data_defaults_next_to_the_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHARED_DATA_ENV, raising=False)
    assert shared_data() == repo_root().parent / "shared" / "data"


def test_shared_data_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_data() == tmp_path
