"""Nothing that works only in the docs: every ``PLACEMENT_*`` variable the README names is a
setting the code reads, and the settings a newcomer needs first (port, bind address, shared
data, MLflow UI port) are in the README and take effect."""

from __future__ import annotations

import re

import pytest

from placement.domain.catalogue_files import PROFILES_ENV
from placement.paths import SHARED_DATA_ENV, repo_root
from serving.api.settings import Settings, load_settings
from serving.gateway.settings import GatewaySettings

README = (repo_root() / "README.md").read_text()


def _known() -> set[str]:
    names = {f"PLACEMENT_{f.upper()}" for f in Settings.model_fields}
    names |= {f"PLACEMENT_GATEWAY_{f.upper()}" for f in GatewaySettings.model_fields}
    return names | {SHARED_DATA_ENV, PROFILES_ENV}


def test_every_variable_the_readme_names_is_read_by_the_code() -> None:
    named = set(re.findall(r"\bPLACEMENT_[A-Z][A-Z0-9_]*[A-Z0-9]\b", README))
    assert named, "the README names no setting"
    assert named - _known() == set()


@pytest.mark.parametrize(
    "variable", ["PLACEMENT_PORT", "PLACEMENT_HOST", SHARED_DATA_ENV, "MLFLOW_PORT"]
)
def test_the_first_settings_a_newcomer_needs_are_in_the_readme(variable: str) -> None:
    assert variable in README


def test_the_port_and_host_variables_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_PORT", "9123")
    monkeypatch.setenv("PLACEMENT_HOST", "0.0.0.0")
    settings = load_settings(environment="development")
    assert (settings.host, settings.port) == ("0.0.0.0", 9123)


def test_the_mlflow_ui_port_is_a_make_variable() -> None:
    makefile = (repo_root() / "Makefile").read_text()
    assert re.search(r"^MLFLOW_PORT \?= \d+$", makefile, re.MULTILINE)
    assert "--port $(MLFLOW_PORT)" in makefile
