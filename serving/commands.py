"""``placement serve``: the placement API under uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from placement.cli import app, user_errors


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
    serve_settings(settings, workers=workers)


def serve_settings(settings: object, *, workers: int = 1) -> None:
    import uvicorn

    from serving.api.settings import Settings
    from serving.wiring import build_app

    assert isinstance(settings, Settings)
    if workers > 1:
        raise typer.BadParameter("several workers: run several processes sharing --redis")
    uvicorn.run(
        build_app(settings),
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
    )
