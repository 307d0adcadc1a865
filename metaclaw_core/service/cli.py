"""The service's commands: ``metaclaw serve`` and ``metaclaw openclaw install``.

``register(app)`` adds them to the main ``metaclaw`` typer app. FastAPI and uvicorn are
imported inside the commands so the rest of the CLI starts without them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer

from metaclaw_core.errors import ConfigError

openclaw_app = typer.Typer(no_args_is_help=True, help="The OpenClaw plugin.")


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Bind address (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default 30000; 0 picks a free one).")
    ] = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            "--upstream",
            help="OpenAI-compatible base URL the /v1/chat/completions proxy forwards to "
            "(default: METACLAW_PROXY__UPSTREAM_BASE_URL).",
        ),
    ] = None,
) -> None:
    """Serve the engine over HTTP and the OpenAI-compatible proxy.

    Inject, capture, feedback, skills, status and metrics under /v1; API docs at /docs.

    /v1/chat/completions forwards to --upstream, skills injected, calls captured.

    A --host other than loopback needs a token (METACLAW_SERVICE__TOKEN).
    """
    from metaclaw_core.config import Settings
    from metaclaw_core.service.auth import check_bind

    settings = Settings()
    if host is not None:
        settings.service.host = host
    if port is not None:
        settings.service.port = port
    if upstream is not None:
        settings.proxy.upstream_base_url = upstream
    svc = settings.service
    try:
        check_bind(svc.host, svc.token.get_secret_value() if svc.token else None)
    except ConfigError as exc:
        _fail(str(exc), code=2)
    from metaclaw_core.service.server import run_service

    try:
        run_service(settings)
    except OSError as exc:
        _fail(f"metaclaw: cannot listen on {svc.host}:{svc.port}: {exc}")
    except ConfigError as exc:
        _fail(str(exc), code=2)


@openclaw_app.command("install")
def openclaw_install(
    openclaw: Annotated[
        str | None,
        typer.Option("--openclaw", help="The openclaw executable (default: the one on PATH)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="OpenClaw config (default ~/.openclaw/openclaw.json)."),
    ] = None,
    plugin_dir: Annotated[
        Path | None, typer.Option("--plugin-dir", help="The plugin folder to link.")
    ] = None,
    service_url: Annotated[
        str | None,
        typer.Option(
            "--service-url", help="Where `metaclaw serve` listens (default from settings)."
        ),
    ] = None,
    top_k: Annotated[
        int | None, typer.Option("--top-k", min=0, max=50, help="Most skills per turn.")
    ] = None,
    link: Annotated[
        bool,
        typer.Option(
            "--link/--no-link",
            help="Run `openclaw plugins install --link` (--no-link: only edit the config).",
        ),
    ] = True,
) -> None:
    """Link the MetaClaw plugin into OpenClaw and grant it conversation access."""
    from metaclaw_core.config import Settings
    from metaclaw_core.service.openclaw import (
        find_plugin_dir,
        grant_plugin,
        link_with_openclaw,
        openclaw_config_path,
    )

    settings = Settings()
    try:
        folder = (plugin_dir or find_plugin_dir()).resolve()
        if not (folder / "openclaw.plugin.json").is_file():
            raise ConfigError(f"metaclaw: {folder} holds no openclaw.plugin.json")
        path = (config or openclaw_config_path()).expanduser()
        if link:
            exe = openclaw or shutil.which("openclaw")
            if exe is None:
                raise ConfigError(
                    "metaclaw: no `openclaw` on PATH (it needs Node >= 24.16); pass --openclaw "
                    "PATH, or --no-link to only write the config"
                )
            typer.echo(f"linking {folder} into OpenClaw ...")
            link_with_openclaw(exe, folder)
        host = settings.service.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        plugin_config: dict[str, Any] = {
            "serviceUrl": service_url or f"http://{shown}:{settings.service.port}",
        }
        if top_k is not None:
            plugin_config["topK"] = top_k
        if settings.service.token is not None:
            plugin_config["token"] = settings.service.token.get_secret_value()
        change = grant_plugin(path, plugin_dir=folder, plugin_config=plugin_config)
    except ConfigError as exc:
        _fail(str(exc))
        return
    if change.changes:
        typer.echo(f"updated {change.path}:")
        for line in change.changes:
            typer.echo(f"  {line}")
        if change.backup is not None:
            typer.echo(f"backup: {change.backup}")
    else:
        typer.echo(f"{change.path} already grants the plugin what it needs")
    typer.echo("Start `metaclaw serve`, then OpenClaw turns get skills injected and are captured.")


def register(app: typer.Typer) -> None:
    """Add ``serve`` and the ``openclaw`` group to the main CLI."""
    app.command("serve")(serve)
    app.add_typer(openclaw_app, name="openclaw")
