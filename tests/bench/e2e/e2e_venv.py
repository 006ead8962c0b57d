"""The e2e virtualenv (aiperf, sglang-router, vllm-router) for the tests, made on first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from placement.paths import repo_root

INSTALL_TIMEOUT_S = 1200
# what pip says when a wheel does not exist for this machine (the only reason to skip)
_NO_WHEEL = ("No matching distribution found", "is not a supported wheel on this platform")


def e2e_venv() -> Path:
    done = subprocess.run(
        [str(repo_root() / "scripts" / "e2e-venv")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "PYTHON": sys.executable,
        },
        check=False,
    )
    if done.returncode != 0:
        if any(reason in done.stderr for reason in _NO_WHEEL):
            pytest.skip(f"the e2e tools cannot install here: {done.stderr.strip()[-300:]}")
        pytest.fail(f"scripts/e2e-venv failed ({done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])
