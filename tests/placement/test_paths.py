"""Where the project finds the shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.errors import InputError
from placement.paths import SHARED_DATA_ENV, repo_root, shared_data, shared_file


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


def test_shared_file_that_exists_is_returned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "traces").mkdir()
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_file("traces") == tmp_path / "traces"


@pytest.mark.parametrize("make_base", [False, True])
def test_missing_shared_data_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make_base: bool
) -> None:
    base = tmp_path / "data"
    if make_base:
        base.mkdir()
    monkeypatch.setenv(SHARED_DATA_ENV, str(base))
    with pytest.raises(InputError) as err:
        shared_file("traces/mooncake/trace.jsonl")
    message = str(err.value)
    assert SHARED_DATA_ENV in message
    assert str(base) in message
    assert ("has no traces/mooncake/trace.jsonl" in message) is make_base
