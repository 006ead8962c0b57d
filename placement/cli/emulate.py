"""``placement emulate``: a vLLM-compatible fleet on 127.0.0.1, one port per replica."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from placement.cli.errors import user_errors
from placement.errors import InputError

app = typer.Typer()


def parse_slow(items: list[str]) -> dict[str, float]:
    """``REPLICA=FACTOR`` pairs."""
    out: dict[str, float] = {}
    for item in items:
        replica, _, factor = item.partition("=")
        try:
            value = float(factor)
        except ValueError:
            value = -1.0
        if not replica or value <= 0:
            raise InputError(f"'{item}'", field="--slow", expected="REPLICA=FACTOR, e.g. h100-0=3")
        out[replica] = value
    return out


@app.command("emulate")
@user_errors
def emulate(
    fleet: Annotated[Path, typer.Option(help="fleet YAML: one emulated replica per replica")],
    base_port: Annotated[
        int, typer.Option(help="first replica's port (+1 per replica; 0: free ports)")
    ] = 8100,
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    admin_port: Annotated[
        int | None, typer.Option(help="admin (fault) port; default base-port − 1")
    ] = None,
    time_scale: Annotated[
        float, typer.Option(help="wall seconds per engine second (2: twice as slow)")
    ] = 1.0,
    tokenizer: Annotated[str, typer.Option(help="cl100k_base or o200k_base")] = "cl100k_base",
    block_size: Annotated[int, typer.Option(help="prefix-cache block, tokens")] = 16,
    max_num_seqs: Annotated[
        int | None, typer.Option(help="max running requests per replica (default: fleet file)")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option(help="prompt + output limit (default: the model's)")
    ] = None,
    scheduling_policy: Annotated[
        str,
        typer.Option(help="vLLM's: fcfs, or priority (by each request's 'priority', lower first)"),
    ] = "fcfs",
    fail_rate: Annotated[float, typer.Option(help="share of requests failed at once")] = 0.0,
    fail_status: Annotated[int, typer.Option(help="HTTP status of a failed request")] = 500,
    drop_rate: Annotated[float, typer.Option(help="share of streams cut mid-way")] = 0.0,
    drop_after_tokens: Annotated[
        int, typer.Option(help="tokens before a stream is cut (0: half its output)")
    ] = 0,
    slow: Annotated[
        list[str] | None, typer.Option(help="REPLICA=FACTOR: iterations × FACTOR (repeatable)")
    ] = None,
    stop: Annotated[list[str] | None, typer.Option(help="REPLICA: start it stopped")] = None,
    seed: Annotated[int, typer.Option(help="seed of the fault draws")] = 0,
    addresses_out: Annotated[
        Path | None, typer.Option(help="write {replica: address} JSON here")
    ] = None,
) -> None:
    """Serve /v1/completions, /v1/chat/completions, /v1/models, /health and vLLM /metrics per
    replica (/v1/embeddings for an embedding model), timed by the engine cost model; faults
    through the admin port until Ctrl-C."""
    from placement.domain.fleet import load_fleet
    from sim.emulator import EmulatorOptions, FleetEmulator, ReplicaFaults

    spec = load_fleet(fleet)
    ids = {r.id for r in spec.replicas}
    common: dict[str, Any] = {
        "fail_rate": fail_rate,
        "fail_status": fail_status,
        "drop_rate": drop_rate,
        "drop_after_tokens": drop_after_tokens,
    }
    base = ReplicaFaults().updated(common, source="flags")
    slowed = parse_slow(slow or [])
    for replica in [*slowed, *(stop or [])]:
        if replica not in ids:
            raise InputError(f"no replica {replica!r} in {fleet}", field="--slow/--stop")
    faults = {
        rid: base.updated(
            {"slowdown": slowed.get(rid, 1.0), "stopped": rid in (stop or [])}, source="flags"
        )
        for rid in ids
    }
    options = EmulatorOptions(
        host=host,
        base_port=base_port,
        admin_port=admin_port,
        time_scale=time_scale,
        tokenizer=tokenizer,
        block_tokens=block_size,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        seed=seed,
        faults=faults,
        scheduling=scheduling_policy,
    )
    emulator = FleetEmulator(spec, options)
    _run(emulator, addresses_out)


def _run(emulator: Any, addresses_out: Path | None) -> None:
    import json

    async def main() -> None:
        await emulator.start()
        addresses = emulator.addresses()
        if addresses_out is not None:
            addresses_out.parent.mkdir(parents=True, exist_ok=True)
            addresses_out.write_text(json.dumps(addresses, indent=2) + "\n")
        for rid, address in addresses.items():
            typer.echo(f"{rid}\t{address}")
        typer.secho(
            f"emulating {len(addresses)} replicas; faults: {emulator.admin_url}/admin/replicas "
            f"(time scale {emulator.options.time_scale:g}); Ctrl-C stops",
            err=True,
        )
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        try:
            await done.wait()
        finally:
            await emulator.stop()

    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(main())
