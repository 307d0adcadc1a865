"""``metaclaw connect claude-code|codex|openclaw``: the settings a client needs to reach the
service, printed, or with ``--write`` applied (idempotently) and with ``--undo`` taken back.

What each write touches, and how it is undone:

* Claude Code: ``env.ANTHROPIC_BASE_URL`` in ``~/.claude/settings.json`` (or
  ``$CLAUDE_CONFIG_DIR``). The value it replaced is kept in ``settings.json.metaclaw-connect``
  next to it; ``--undo`` puts it back (or removes the key) if the value is still ours.
* Codex: a profile file of its own, ``$CODEX_HOME/metaclaw.config.toml`` (Codex ≥ 0.17x reads
  ``--profile NAME`` from ``NAME.config.toml``); ``config.toml`` is not touched. ``--undo``
  deletes the file if it still carries our marker.
* OpenClaw: the plugin entry in ``~/.openclaw/openclaw.json`` (as ``metaclaw openclaw
  install --no-link`` does, without the service token); what it replaced is kept in
  ``openclaw.json.metaclaw-connect``.

No API key is written anywhere: the clients keep their own keys (or logins), which the
proxy forwards; a service token is named by its environment variable, never copied.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from metaclaw_core.errors import ConfigError
from metaclaw_core.service.openclaw import (
    PLUGIN_ID,
    apply_plugin_entry,
    find_plugin_dir,
    openclaw_config_path,
    read_config,
    write_config_atomically,
)

if TYPE_CHECKING:  # `metaclaw --help` loads neither the settings nor httpx
    import httpx

    from metaclaw_core.config import Settings

CODEX_PROFILE = "metaclaw"
MARKER = "# written by `metaclaw connect codex`; `metaclaw connect codex --undo` removes it"
RECORD_SUFFIX = ".metaclaw-connect"
PROBE_TIMEOUT_S = 2.0
TOKEN_ENV = "METACLAW_SERVICE__TOKEN"


class Client(StrEnum):
    claude_code = "claude-code"
    codex = "codex"
    openclaw = "openclaw"


@dataclass
class Outcome:
    """What a write or an undo did (empty ``changes``: nothing needed doing)."""

    path: Path
    changes: list[str] = field(default_factory=list)


# -- the service ------------------------------------------------------------------------------
def service_url(settings: Settings) -> str:
    host = settings.service.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{settings.service.port}"


def probe(url: str, token: str | None, transport: httpx.BaseTransport | None = None) -> str:
    """One line on whether the service answers: ``/readyz``, or ``/healthz`` where that is
    404 (older services)."""
    import httpx

    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(
            base_url=url, timeout=PROBE_TIMEOUT_S, headers=headers, transport=transport
        ) as http:
            r = http.get("/readyz")
            route = "/readyz"
            if r.status_code == 404:
                r, route = http.get("/healthz"), "/healthz"
    except httpx.HTTPError as exc:
        return f"metaclaw serve at {url}: not reachable ({type(exc).__name__}); start it first"
    try:
        data = r.json()
    except ValueError:
        data = {}
    if r.status_code == 401:
        return f"metaclaw serve at {url}: answers, but wants the service token ({route})"
    ready = r.status_code == 200 and data.get("ready", True) is not False
    state = "ready" if ready else f"not ready yet (HTTP {r.status_code})"
    generation = data.get("generation") if isinstance(data, dict) else None
    more = f", skill generation {generation}" if generation is not None else ""
    return f"metaclaw serve at {url}: {state}{more} ({route})"


# -- JSON files with a record of what was replaced ---------------------------------------------
def _record_path(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def _read_record(path: Path) -> dict[str, Any] | None:
    rec = _record_path(path)
    if not rec.exists():
        return None
    try:
        data = json.loads(rec.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"metaclaw: {rec} is not JSON ({exc}); remove it by hand") from exc
    return data if isinstance(data, dict) else None


def _write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _record_path(path).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _env_section(config: dict[str, Any], path: Path) -> dict[str, Any]:
    env = config.setdefault("env", {})
    if not isinstance(env, dict):
        raise ConfigError(f"metaclaw: 'env' in {path} is not an object; it was left untouched")
    return env


# -- Claude Code --------------------------------------------------------------------------------
def claude_settings_path() -> Path:
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "settings.json"


def write_claude(path: Path, url: str) -> Outcome:
    config = read_config(path)
    had_env = "env" in config
    env = _env_section(config, path)
    out = Outcome(path)
    if env.get("ANTHROPIC_BASE_URL") == url:
        return out
    record = _read_record(path)
    if record is None:  # the first write keeps what was there before us
        record = {"ANTHROPIC_BASE_URL": env.get("ANTHROPIC_BASE_URL"), "had_env": had_env}
    _write_record(path, {**record, "ours": url})
    env["ANTHROPIC_BASE_URL"] = url
    write_config_atomically(path, config)
    out.changes.append(f"env.ANTHROPIC_BASE_URL = {url}")
    return out


def undo_claude(path: Path) -> Outcome:
    out = Outcome(path)
    record = _read_record(path)
    if record is None:
        return out
    config = read_config(path)
    env = _env_section(config, path)
    if env.get("ANTHROPIC_BASE_URL") == record.get("ours"):
        previous = record.get("ANTHROPIC_BASE_URL")
        if previous is None:
            env.pop("ANTHROPIC_BASE_URL", None)
            out.changes.append("env.ANTHROPIC_BASE_URL removed")
        else:
            env["ANTHROPIC_BASE_URL"] = previous
            out.changes.append(f"env.ANTHROPIC_BASE_URL = {previous} (as before)")
        if not env and not record.get("had_env"):
            config.pop("env")
        write_config_atomically(path, config)
    else:
        out.changes.append("env.ANTHROPIC_BASE_URL was changed since; left as it is")
    _record_path(path).unlink()
    return out


# -- Codex ------------------------------------------------------------------------------------
def codex_home() -> Path:
    base = os.environ.get("CODEX_HOME")
    return Path(base).expanduser() if base else Path.home() / ".codex"


def codex_profile_text(url: str, token: str | None) -> str:
    env_key = TOKEN_ENV if token else "OPENAI_API_KEY"
    return (
        f"{MARKER}\n"
        f'model_provider = "{CODEX_PROFILE}"\n\n'
        f"[model_providers.{CODEX_PROFILE}]\n"
        'name = "MetaClaw proxy"\n'
        f'base_url = "{url}/v1"\n'
        'wire_api = "responses"\n'
        f'env_key = "{env_key}"\n'
    )


def write_codex(path: Path, text: str) -> Outcome:
    out = Outcome(path)
    if path.exists():
        current = path.read_text(encoding="utf-8")
        if current == text:
            return out
        if not current.startswith(MARKER):
            raise ConfigError(
                f"metaclaw: {path} exists and was not written by `metaclaw connect`; it was "
                "left untouched (move it away, or pick the profile by hand)"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    out.changes.append(f"wrote profile '{CODEX_PROFILE}' ({path})")
    return out


def undo_codex(path: Path) -> Outcome:
    out = Outcome(path)
    if not path.exists():
        return out
    if not path.read_text(encoding="utf-8").startswith(MARKER):
        raise ConfigError(f"metaclaw: {path} was not written by `metaclaw connect`; left as is")
    path.unlink()
    out.changes.append(f"removed {path}")
    return out


# -- OpenClaw -----------------------------------------------------------------------------------
def write_openclaw(path: Path, plugin_dir: Path, url: str) -> Outcome:
    config = read_config(path)
    plugins = _obj(config.get("plugins"))
    entries, load = _obj(plugins.get("entries")), _obj(plugins.get("load"))
    before = {
        "entry": entries.get(PLUGIN_ID),
        "had_path": str(plugin_dir) in (load.get("paths") or []),
        "had_allow": PLUGIN_ID in (plugins.get("allow") or []),
        "plugin_dir": str(plugin_dir),
    }
    changes = apply_plugin_entry(config, plugin_dir=plugin_dir, plugin_config={"serviceUrl": url})
    out = Outcome(path, changes)
    if changes:
        if _read_record(path) is None:
            _write_record(path, before)
        write_config_atomically(path, config)
    return out


def undo_openclaw(path: Path) -> Outcome:
    out = Outcome(path)
    record = _read_record(path)
    if record is None:
        return out
    config = read_config(path)
    plugins = config.get("plugins")
    if isinstance(plugins, dict):
        entries = plugins.get("entries")
        if isinstance(entries, dict):
            if record.get("entry") is None:
                entries.pop(PLUGIN_ID, None)
                out.changes.append(f"plugins.entries.{PLUGIN_ID} removed")
            else:
                entries[PLUGIN_ID] = record["entry"]
                out.changes.append(f"plugins.entries.{PLUGIN_ID} restored")
        paths = (plugins.get("load") or {}).get("paths")
        mine = record.get("plugin_dir")
        if not record.get("had_path") and isinstance(paths, list) and mine in paths:
            paths.remove(mine)
            out.changes.append(f"plugins.load.paths -= {mine}")
        allow = plugins.get("allow")
        if not record.get("had_allow") and isinstance(allow, list) and PLUGIN_ID in allow:
            allow.remove(PLUGIN_ID)
            out.changes.append(f"plugins.allow -= {PLUGIN_ID}")
    if out.changes:
        write_config_atomically(path, config)
    _record_path(path).unlink()
    return out


# -- what is printed ------------------------------------------------------------------------------
def config_path(client: Client, config: Path | None) -> Path:
    """The file ``--write`` edits: ``config``, or the client's default."""
    if config is not None:
        return config.expanduser()
    if client is Client.claude_code:
        return claude_settings_path()
    if client is Client.codex:
        return codex_home() / f"{CODEX_PROFILE}.config.toml"
    return openclaw_config_path()


def instructions(
    client: Client, settings: Settings, url: str, token: str | None, path: Path
) -> list[str]:
    proxy = settings.proxy
    if client is Client.claude_code:
        lines = [
            "Claude Code speaks the Anthropic Messages API; point it at the proxy:",
            "",
            f"  export ANTHROPIC_BASE_URL={url}",
            "",
            f"or for every session, in {path}:",
            f'  {{"env": {{"ANTHROPIC_BASE_URL": "{url}"}}}}',
            "(`--write` sets it there; `--undo` puts back what was there before)",
            "",
            f"Calls go on to proxy.anthropic_base_url ({proxy.anthropic_base_url or 'not set'}) "
            "with Claude Code's own key or login.",
        ]
        if not proxy.anthropic_base_url:
            lines.append(
                "warning: set METACLAW_PROXY__ANTHROPIC_BASE_URL=https://api.anthropic.com "
                "before `metaclaw serve` (until then /v1/messages answers 503)"
            )
        if token:
            lines.append(
                f'The service has a token: export ANTHROPIC_AUTH_TOKEN="${TOKEN_ENV}" for '
                "Claude Code, and give the proxy the upstream key in "
                "METACLAW_PROXY__ANTHROPIC_API_KEY."
            )
        return lines
    if client is Client.codex:
        lines = [
            "Codex speaks the OpenAI Responses API; a profile sends it through the proxy.",
            f"{path} (`--write` writes it, `--undo` removes it; config.toml is not touched):",
            "",
            *(f"  {line}" for line in codex_profile_text(url, token).splitlines()[1:]),
            "",
            f"then: codex --profile {CODEX_PROFILE}"
            f'   (or: codex exec --profile {CODEX_PROFILE} "…")',
            "",
            f"Calls go on to proxy.upstream_base_url ({proxy.upstream_base_url or 'not set'}).",
        ]
        if not proxy.upstream_base_url:
            lines.append(
                "warning: set METACLAW_PROXY__UPSTREAM_BASE_URL=https://api.openai.com/v1 "
                "before `metaclaw serve` (until then /v1/responses answers 503)"
            )
        if token:
            lines.append(
                f"The service has a token: Codex sends ${TOKEN_ENV} as its key; give the proxy "
                "the upstream key in METACLAW_PROXY__UPSTREAM_API_KEY."
            )
        return lines
    lines = [
        "OpenClaw learns through the MetaClaw plugin (skills in before_prompt_build, capture at",
        "agent_end). `metaclaw openclaw install` links it and grants its hooks; `--write` here",
        f"does the config part in {path} (`--undo` takes it back):",
        "",
        f'  plugins.entries.{PLUGIN_ID} = {{"enabled": true, "hooks": '
        f'{{"allowConversationAccess": true}}, "config": {{"serviceUrl": "{url}"}}}}',
    ]
    if token:
        lines.append(
            "The service has a token: `metaclaw openclaw install` stores it in the plugin's "
            "config (this command writes no secrets)."
        )
    return lines


def apply(client: Client, url: str, token: str | None, path: Path) -> Outcome:
    if client is Client.claude_code:
        return write_claude(path, url)
    if client is Client.codex:
        return write_codex(path, codex_profile_text(url, token))
    return write_openclaw(path, find_plugin_dir(), url)


def undo(client: Client, path: Path) -> Outcome:
    if client is Client.claude_code:
        return undo_claude(path)
    if client is Client.codex:
        return undo_codex(path)
    return undo_openclaw(path)


def connect(
    client: Annotated[Client, typer.Argument(help="The client to connect.")],
    url: Annotated[
        str | None,
        typer.Option("--url", help="Where `metaclaw serve` listens (default from settings)."),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Apply the settings (idempotent, reversible).")
    ] = False,
    undo_: Annotated[
        bool, typer.Option("--undo", help="Take back what an earlier --write applied.")
    ] = False,
    config: Annotated[
        Path | None, typer.Option("--config", help="The client's settings file to edit.")
    ] = None,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Do not check that the service answers.")
    ] = False,
) -> None:
    """Print (or --write / --undo) the settings a client needs to go through the proxy."""
    from metaclaw_core.config import Settings

    settings = Settings()
    token = settings.service.token.get_secret_value() if settings.service.token else None
    base = (url or service_url(settings)).rstrip("/")
    if write and undo_:
        typer.echo("error: --write and --undo exclude each other", err=True)
        raise typer.Exit(2)
    path = config_path(client, config)
    try:
        if undo_:
            result = undo(client, path)
            if result.changes:
                typer.echo(f"updated {result.path}:")
                for line in result.changes:
                    typer.echo(f"  {line}")
            else:
                typer.echo(f"nothing to undo in {result.path}")
            return
        if not no_probe:
            typer.echo(probe(base, token))
        for line in instructions(client, settings, base, token, path):
            typer.echo(line)
        if write:
            result = apply(client, base, token, path)
            typer.echo("")
            if result.changes:
                typer.echo(f"updated {result.path}:")
                for line in result.changes:
                    typer.echo(f"  {line}")
            else:
                typer.echo(f"{result.path} already has these settings")
    except ConfigError as exc:
        typer.echo(f"error: {str(exc).removeprefix('metaclaw: ')}", err=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    """Add ``connect`` to the main CLI."""
    app.command("connect")(connect)
