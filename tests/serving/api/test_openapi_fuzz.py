"""Fuzz the whole OpenAPI surface of the service as ``placement serve --demo`` wires it.

schemathesis (its CLI, ``st run``) with every check (``--checks all``: no server error,
response schemas and headers, documented status codes and content types, negative data
rejected and valid data accepted, unsupported methods and ``Allow``, missing or invalid
authentication, response time) and every phase (the schema's examples, coverage of each
keyword, random fuzzing, stateful sequences following the inferred links), against a real
``placement serve --demo`` process (uvicorn, the route path, the planner with its solver
worker, emulated replicas), with a key holding every scope. Bounded and deterministic: the
same cases every run.

The planner runs as in the demo, its loop included: solves run in the worker process, so the
ones the fuzzer's replica changes start never hold up an answer (``POST /v1/plan:solve`` is
fuzzed like the rest).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from live_server import demo_service

from serving.api.security import hash_key
from serving.api.settings import SCOPES, ApiKey

KEY = "fuzz-key-0123456789abcdef"
MAX_EXAMPLES = 8
RUN_TIMEOUT_S = 600
CONFIG = """
# 503 is the documented answer when the model's replicas are all down (a replica the fuzzer
# registered at an address that does not answer is soon marked unhealthy)
[[operations]]
include-name = "POST /v1/route"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]

# A solve on request answers when the solve ends: the instance built from the fleet and the
# demand, then the solver's time limit (10 s) and the worker's grace (5 s). It takes no input,
# so the fuzzing phase would only repeat the coverage phase's request, at a solve's cost.
[[operations]]
include-name = "POST /v1/plan:solve"
checks.max_response_time = 120.0
phases.fuzzing.enabled = false
"""


def test_every_check_passes_against_the_demo_service(tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    keys = [ApiKey(name="fuzz", digest=hash_key(KEY), scopes=SCOPES)]
    with demo_service(tmp_path, keys, {}) as url:
        run = subprocess.run(
            [
                *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(config)),
                *("--no-color", "run", f"{url}/openapi.json", "--checks", "all"),
                *("--max-examples", str(MAX_EXAMPLES), "--generation-deterministic"),
                *("--workers", "1", "--request-timeout", "180"),
                *("-H", f"Authorization: Bearer {KEY}", "-H", f"X-API-Key: {KEY}"),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    report = run.stdout + run.stderr
    summary = report.split("SUMMARY")[-1]
    assert run.returncode == 0, report[-20_000:]
    assert "24 selected / 24 total" in report  # every operation
    assert "Tested: 24" in summary, summary
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in summary, summary
    assert " failed" not in summary and "error" not in summary.lower(), summary
