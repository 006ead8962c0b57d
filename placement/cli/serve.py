"""``placement serve``: the placement API under uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from placement.cli.errors import user_errors
from placement.paths import repo_root

DEMO_FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"


app = typer.Typer()


@app.command("serve")
@user_errors
def serve(
    fleet: Annotated[
        Path | None, typer.Option(help="fleet YAML (replicas and the planner)")
    ] = None,
    profile: Annotated[Path | None, typer.Option(help="route profile YAML")] = None,
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(help="port")] = None,
    no_plan_fallback: Annotated[
        bool, typer.Option("--no-plan-fallback", help="ready without a plan (greedy routing)")
    ] = False,
    plan_dir: Annotated[Path | None, typer.Option(help="plan store directory")] = None,
    redis: Annotated[str | None, typer.Option(help="redis://… plan store (shared)")] = None,
    dev: Annotated[bool, typer.Option("--dev", help="development: a generated key")] = False,
    workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes")] = 1,
    hash_key: Annotated[
        str | None, typer.Option("--hash-key", help="print the digest to configure for a key")
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="development on a demo fleet: emulated vLLM replicas (OpenAI API, /metrics)",
        ),
    ] = False,
    proxy: Annotated[
        bool,
        typer.Option(
            "--proxy",
            help="gateway mode: also serve /v1/completions and /v1/chat/completions, forwarded "
            "to the replica the route path picks",
        ),
    ] = False,
    addresses: Annotated[
        Path | None,
        typer.Option(help="JSON {replica id: address} (e.g. from placement emulate)"),
    ] = None,
    telemetry: Annotated[
        Path | None, typer.Option(help="gateway mode: append request outcomes to this store")
    ] = None,
) -> None:
    """Serve the placement API (OpenAPI docs at /docs). Settings also from PLACEMENT_* vars."""
    from serving.api.security import generate_key
    from serving.api.security import hash_key as digest
    from serving.api.settings import load_settings

    if hash_key is not None:
        typer.echo(digest(hash_key))
        return
    if plan_dir is not None and redis is not None:
        raise typer.BadParameter("give --plan-dir or --redis, not both")
    if demo:
        dev = True
        fleet = fleet or DEMO_FLEET
        no_plan_fallback = True
    flags = {
        "fleet": fleet,
        "profile": profile,
        "host": host,
        "port": port,
        "plan_dir": plan_dir,
        "redis_url": redis,
        "no_plan_fallback": no_plan_fallback or None,
        "environment": "development" if dev else None,
    }
    settings = load_settings(**{k: v for k, v in flags.items() if v is not None})
    if settings.environment == "development" and not settings.all_keys():
        key = generate_key()
        settings = settings.model_copy(update={"dev_key": key})
        typer.secho(f"development key (all scopes): {key}", fg=typer.colors.YELLOW, err=True)
        _print_example(settings.host, settings.port, key)
    gateway = None
    if proxy:
        from serving.gateway import load_gateway_settings

        overrides = {"enabled": True, "telemetry_dir": telemetry}
        gateway = load_gateway_settings(**{k: v for k, v in overrides.items() if v is not None})
    given = _read_addresses(addresses) if addresses is not None else None
    emulated = _start_emulator(settings.fleet) if demo and given is None else None
    serve_settings(settings, workers=workers, addresses=given or emulated, gateway=gateway)


def _read_addresses(path: Path) -> dict[str, str]:
    """``{replica id: address}`` from a JSON file; one line naming the file otherwise."""
    import json

    from placement.errors import InputError

    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=str(path), line=exc.lineno) from None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise InputError(
            "expected an object of replica id → address", source=str(path), field="addresses"
        )
    return raw


def _print_example(host: str, port: int, key: str) -> None:
    typer.secho(
        f"docs: http://{host}:{port}/docs\n"
        f"try:  curl -s -X POST http://{host}:{port}/v1/route -H 'Authorization: Bearer {key}' "
        '-H \'Content-Type: application/json\' -d \'{"tenant": "acme", "model": '
        '"llama-3-8b", "request_class": "interactive", "prompt": "You are a helpful '
        'assistant. Summarise the following text …", "max_output_tokens": 128}\'',
        err=True,
    )


def _start_emulator(fleet_file: Path | None) -> dict[str, str]:
    """The demo fleet emulated (``sim.emulator``: OpenAI endpoints and vLLM ``/metrics`` per
    replica, on free ports, in a background thread); their addresses by replica id."""
    from placement.domain.fleet import load_fleet
    from sim.emulator import EmulatorOptions, EmulatorThread

    if fleet_file is None:
        raise typer.BadParameter("--demo needs a fleet")
    fleet = load_fleet(fleet_file)
    emulator = EmulatorThread(fleet, EmulatorOptions(base_port=0)).start()
    addresses = emulator.addresses()
    typer.secho(
        f"emulating {len(addresses)} replicas of {fleet.name} on 127.0.0.1 "
        f"(faults: {emulator.fleet.admin_url}/admin/replicas)",
        err=True,
    )
    return addresses


def serve_settings(
    settings: object,
    *,
    workers: int = 1,
    addresses: dict[str, str] | None = None,
    gateway: object | None = None,
) -> None:
    import uvicorn

    from serving.api.settings import Settings
    from serving.wiring import build_app

    assert isinstance(settings, Settings)
    if workers > 1:
        raise typer.BadParameter("several workers: run several processes sharing --redis")
    from serving.gateway import GatewaySettings

    assert gateway is None or isinstance(gateway, GatewaySettings)
    uvicorn.run(
        build_app(settings, addresses=addresses, gateway=gateway),
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
    )
