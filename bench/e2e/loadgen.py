"""The load generator: NVIDIA's aiperf replaying a trace file open-loop at its timestamps.

aiperf runs from the e2e virtualenv (``scripts/e2e-venv``) as its own process tree: it reads the
Mooncake-format file (:mod:`bench.e2e.trace_file`) with ``--fixed-schedule`` (every request
sent at its timestamp, whatever the answers before it), streams every answer, counts tokens
with the tokenizer folder made from the emulator's own vocabulary
(:mod:`bench.e2e.tokenizer_folder`; its built-in tokenizer would download one) and writes one
record per request (``profile_export.jsonl``), which :func:`read_records` turns into what the
comparison reports. Several URLs are taken round robin (aiperf's ``--url-strategy``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from placement.errors import InputError

RECORDS = "profile_export.jsonl"
MS = 1e-3


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One request as aiperf measured it (seconds; NaN when not measured)."""

    ok: bool
    start_s: float  # wall clock, when aiperf sent it
    ttft_s: float
    tpot_s: float  # aiperf's inter-token latency: (latency − TTFT) / (output tokens − 1)
    latency_s: float
    output_tokens: int
    error: str = ""


def aiperf_command(
    venv: Path,
    *,
    urls: list[str],
    model: str,
    trace: Path,
    tokenizer: Path,
    artifacts: Path,
    api_key: str | None,
    timeout_s: float,
    headers: dict[str, str] | None = None,
) -> list[str]:
    args = [
        str(venv / "bin" / "aiperf"),
        "profile",
        *("--model", model, "--endpoint-type", "completions", "--streaming"),
        *(part for url in urls for part in ("--url", url)),
        *("--input-file", str(trace), "--custom-dataset-type", "mooncake_trace"),
        "--fixed-schedule",
        *("--tokenizer", str(tokenizer), "--use-legacy-max-tokens"),
        # token counts from the answers' usage (exact: the emulator's own count) rather than by
        # tokenizing every answer again in the load generator, which shares the 2 cores
        "--use-server-token-count",
        *("--request-timeout-seconds", f"{timeout_s:g}"),
        *("--artifact-dir", str(artifacts), "--ui-type", "none", "--no-auto-plot"),
        *("--no-gpu-telemetry", "--no-server-metrics"),
    ]
    if len(urls) > 1:
        args += ["--url-strategy", "round_robin"]
    if api_key:
        args += ["--api-key", api_key]
    if headers:
        # as one JSON object (a value holding a comma stays whole); aiperf turns a value that
        # reads as a number into one and then refuses it as a header: send names, not numbers
        args += ["--header", json.dumps(headers)]
    return args


def run_aiperf(args: list[str], artifacts: Path, *, timeout_s: float) -> list[Record]:
    """Run aiperf to the end; its records (a clear error naming the log when it fails)."""
    artifacts.mkdir(parents=True, exist_ok=True)
    log = artifacts / "aiperf.out"
    # a local tokenizer folder is read as a path, not looked up on the Hugging Face hub
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)  # aiperf's own virtualenv, not the project's modules
    with log.open("wb") as out:
        done = subprocess.run(
            args, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False
        )
    records = artifacts / RECORDS
    if done.returncode != 0 or not records.exists():
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"aiperf failed ({done.returncode}); see {log}:\n{tail}")
    return read_records(records)


def read_records(path: Path) -> list[Record]:
    """aiperf's per-request export as :class:`Record` s (profiling phase only)."""
    out: list[Record] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            meta = raw.get("metadata", {})
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue
            metrics = raw.get("metrics", {})
        except (json.JSONDecodeError, AttributeError):
            raise InputError("not an aiperf record", source=str(path), line=number) from None
        error = _error(raw.get("error"))
        ttft = _value(metrics, "time_to_first_token")
        tokens = _value(metrics, "output_sequence_length", scale=1.0)
        out.append(
            Record(
                ok=not error and not math.isnan(ttft),
                start_s=float(meta.get("request_start_ns", 0)) * 1e-9,
                ttft_s=ttft,
                tpot_s=_value(metrics, "inter_token_latency"),
                latency_s=_value(metrics, "request_latency"),
                output_tokens=0 if math.isnan(tokens) else int(tokens),
                error=error,
            )
        )
    return out


def _error(error: object) -> str:
    if not error:
        return ""
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)
    return str(error)


def _value(metrics: dict[str, object], name: str, *, scale: float = MS) -> float:
    entry = metrics.get(name)
    if not isinstance(entry, dict):
        return float("nan")
    value = entry.get("value")
    if not isinstance(value, int | float):
        return float("nan")
    unit = entry.get("unit", "ms")
    return float(value) * (scale if unit == "ms" else 1.0)
