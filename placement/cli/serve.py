"""``placement serve``: the placement API under uvicorn, or (``--epp``) the Envoy ext_proc
endpoint picker in front of the same service."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from placement.cli.announce import DEV_KEY_FILE, announce_when_ready, dev_key, example, say
from placement.cli.errors import user_errors
from placement.paths import repo_root

DEMO_FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"
EPP_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
ENVOY_LISTEN_PORT = 10000
ENVOY_ADMIN_PORT = 9901


app = typer.Typer()


@app.command("serve")
@user_errors
def serve(
    fleet: Annotated[
        Path | None, typer.Option(help="fleet YAML (replicas and the planner)")
    ] = None,
    profile: Annotated[Path | None, typer.Option(help="route profile YAML")] = None,
    tenants: Annotated[
        Path | None, typer.Option(help="tenants YAML: declared tenants and credit shares")
    ] = None,
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
    epp: Annotated[
        bool,
        typer.Option(
            "--epp",
            help="serve the Envoy ext_proc endpoint picker (Gateway API Inference Extension) "
            "instead of the HTTP API",
            rich_help_panel="Endpoint picker",
        ),
    ] = False,
    epp_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            envvar="PLACEMENT_EPP_PORT",
            help="ext_proc gRPC port",
            rich_help_panel="Endpoint picker",
        ),
    ] = EPP_PORT,
    epp_health_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            envvar="PLACEMENT_EPP_HEALTH_PORT",
            help="gRPC health port (liveness, readiness, the ext_proc service)",
            rich_help_panel="Endpoint picker",
        ),
    ] = EPP_HEALTH_PORT,
    epp_metrics_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            envvar="PLACEMENT_EPP_METRICS_PORT",
            help="Prometheus /metrics port",
            rich_help_panel="Endpoint picker",
        ),
    ] = EPP_METRICS_PORT,
    epp_fallbacks: Annotated[
        int | None,
        typer.Option(
            min=0,
            envvar="PLACEMENT_EPP_FALLBACKS",
            help="fallback endpoints listed after the primary (default: all the decision "
            "lists); 0 for a proxy whose cluster reads one address (Envoy's ORIGINAL_DST)",
            rich_help_panel="Endpoint picker",
        ),
    ] = None,
    print_envoy_config: Annotated[
        bool,
        typer.Option(
            "--print-envoy-config",
            help="print an Envoy bootstrap (JSON) that sends the fleet's traffic through this "
            "picker, and exit",
            rich_help_panel="Endpoint picker",
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
    batch_dir: Annotated[
        Path | None,
        typer.Option(
            help="gateway mode: serve the Batch API (/v1/files, /v1/batches), its files and "
            "jobs kept in this folder across restarts"
        ),
    ] = None,
) -> None:
    """Serve the placement API (OpenAPI docs at /docs). Settings also from PLACEMENT_* vars."""
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
    if print_envoy_config:
        typer.echo(_envoy_config(fleet, epp_port, epp_fallbacks))
        return
    flags = {
        "fleet": fleet,
        "profile": profile,
        "tenants_file": tenants,
        "host": host,
        "port": port,
        "plan_dir": plan_dir,
        "redis_url": redis,
        "no_plan_fallback": no_plan_fallback or None,
        "environment": "development" if dev else None,
    }
    if epp:
        # the picker serves no key-protected API (the proxy authenticates clients, as with the
        # Inference Extension's picker): the keys the HTTP API demands outside development are
        # not asked for, nor is a development key generated
        flags["environment"] = "development"
        settings = load_settings(**{k: v for k, v in flags.items() if v is not None})
        from serving.epp import serve_epp

        given = _read_addresses(addresses) if addresses is not None else None
        emulated = _start_emulator(settings.fleet) if demo and given is None else None
        serve_epp(
            settings,
            port=epp_port,
            health_port=epp_health_port,
            metrics_port=epp_metrics_port,
            max_fallbacks=epp_fallbacks,
            addresses=given or emulated,
        )
        return
    started = time.monotonic()
    settings = load_settings(**{k: v for k, v in flags.items() if v is not None})
    lines: list[str] = []
    key: str | None = None
    if settings.environment == "development" and not settings.all_keys():
        key = dev_key()
        settings = settings.model_copy(update={"dev_key": key})
        lines.append(f"development key (all scopes, kept in {DEV_KEY_FILE}): {key}")
    lines.append(example(settings.host, settings.port, key))
    gateway = None
    if proxy:
        from serving.gateway import load_gateway_settings

        overrides = {"enabled": True, "telemetry_dir": telemetry, "batch_dir": batch_dir}
        gateway = load_gateway_settings(**{k: v for k, v in overrides.items() if v is not None})
    given = _read_addresses(addresses) if addresses is not None else None
    emulated = _start_emulator(settings.fleet) if demo and given is None else None
    say(
        f"starting the API on {settings.host}:{settings.port} "
        "(the key and a curl follow once it is ready)"
    )
    announce_when_ready(settings.host, settings.port, lines, started=started)
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


def _envoy_config(fleet_file: Path | None, epp_port: int, fallbacks: int | None) -> str:
    """An Envoy bootstrap for the fleet's replicas behind a picker on ``epp_port``: an
    ORIGINAL_DST cluster when the picker lists no fallbacks, else override-host over the
    fleet's addresses."""
    import ipaddress

    from placement.domain.fleet import load_fleet
    from serving.epp import endpoint_of
    from serving.epp.envoy_config import EnvoyConfig, to_json
    from serving.wiring import fleet_states

    if fleet_file is None:
        raise typer.BadParameter("--print-envoy-config needs a fleet (--fleet)")
    replicas = []
    for state in fleet_states(load_fleet(fleet_file)):
        endpoint = endpoint_of(state.address)
        host = endpoint.rsplit(":", 1)[0].strip("[]")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise typer.BadParameter(
                f"{fleet_file}: replica {state.id}'s address '{endpoint}' is not ip:port; "
                "Envoy routes to the picker's endpoints by IP (set the replica's "
                "labels.address)"
            ) from None
        replicas.append(endpoint)
    config = EnvoyConfig(
        picker=f"127.0.0.1:{epp_port}",
        listen_port=ENVOY_LISTEN_PORT,
        admin_port=ENVOY_ADMIN_PORT,
        routing="original-dst" if fallbacks == 0 else "override-host",
        replicas=replicas,
    )
    return to_json(config.bootstrap())


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
    say(
        f"emulating {len(addresses)} replicas of {fleet.name} on 127.0.0.1 "
        f"(faults: {emulator.fleet.admin_url}/admin/replicas)"
    )
    return addresses


def serve_settings(
    settings: object,
    *,
    workers: int = 1,
    addresses: dict[str, str] | None = None,
    gateway: object | None = None,
) -> None:
    from serving.api.server import serve_app
    from serving.api.settings import Settings
    from serving.wiring import build_app

    assert isinstance(settings, Settings)
    if workers > 1:
        raise typer.BadParameter("several workers: run several processes sharing --redis")
    from serving.gateway import GatewaySettings

    assert gateway is None or isinstance(gateway, GatewaySettings)
    serve_app(
        build_app(settings, addresses=addresses, gateway=gateway),
        host=settings.host,
        port=settings.port,
    )
