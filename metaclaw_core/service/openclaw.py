"""Installing the OpenClaw plugin: link ``integrations/openclaw`` into OpenClaw and grant it
the conversation hooks it needs in ``~/.openclaw/openclaw.json``.

``openclaw plugins install --link`` records the path and enables the plugin, but does not
grant ``hooks.allowConversationAccess`` (without it OpenClaw drops ``before_prompt_build``
and ``agent_end`` with a warning). The config edit is ours, done safely: parse, change only
our own entry (and add our id to an existing ``plugins.allow`` list, never replacing it),
back the old file up, and replace the file atomically with its permissions kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaclaw_core.errors import ConfigError

PLUGIN_ID = "metaclaw"
REPO_PLUGIN_DIR = Path(__file__).resolve().parents[2] / "integrations" / "openclaw"
DEFAULT_SERVICE_URL = "http://127.0.0.1:30000"
LINK_TIMEOUT_S = 180


def openclaw_config_path(home: Path | None = None) -> Path:
    """Where OpenClaw keeps its config (``$OPENCLAW_CONFIG_PATH`` or ``~/.openclaw/...``)."""
    explicit = os.environ.get("OPENCLAW_CONFIG_PATH")
    if explicit and home is None:
        return Path(explicit).expanduser()
    base = home if home is not None else Path.home()
    return base / ".openclaw" / "openclaw.json"


def find_plugin_dir() -> Path:
    """The plugin's folder (``integrations/openclaw`` next to this source tree)."""
    if (REPO_PLUGIN_DIR / "openclaw.plugin.json").is_file():
        return REPO_PLUGIN_DIR
    raise ConfigError(
        "metaclaw: the OpenClaw plugin is not next to this installation (it lives in the "
        "repository's integrations/openclaw); pass --plugin-dir PATH"
    )


def read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"metaclaw: {path} is not plain JSON ({exc}); it was left untouched. Set the entry "
            f"by hand: plugins.entries.{PLUGIN_ID}.hooks.allowConversationAccess = true"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"metaclaw: {path} does not hold a JSON object; it was left untouched")
    return data


def _section(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"metaclaw: {where}.{key} in the OpenClaw config is not an object")
    return value


@dataclass
class ConfigChange:
    """What :func:`grant_plugin` changed (empty ``changes``: the file was already right)."""

    path: Path
    backup: Path | None = None
    changes: list[str] = field(default_factory=list)


def apply_plugin_entry(
    config: dict[str, Any],
    *,
    plugin_dir: Path | None,
    plugin_config: dict[str, Any],
) -> list[str]:
    """Change ``config`` in place so the plugin loads with conversation access; say what."""
    changes: list[str] = []
    plugins = _section(config, "plugins", "")
    if plugin_dir is not None:
        load = _section(plugins, "load", "plugins")
        paths = load.setdefault("paths", [])
        if not isinstance(paths, list):
            raise ConfigError("metaclaw: plugins.load.paths in the OpenClaw config is not a list")
        if str(plugin_dir) not in paths:
            paths.append(str(plugin_dir))
            changes.append(f"plugins.load.paths += {plugin_dir}")
    allow = plugins.get("allow")
    if isinstance(allow, list) and PLUGIN_ID not in allow:
        allow.append(PLUGIN_ID)  # an exclusive allow-list: add ourselves, keep everyone else
        changes.append(f"plugins.allow += {PLUGIN_ID}")
    entries = _section(plugins, "entries", "plugins")
    entry = _section(entries, PLUGIN_ID, "plugins.entries")
    if entry.get("enabled") is not True:
        entry["enabled"] = True
        changes.append(f"plugins.entries.{PLUGIN_ID}.enabled = true")
    hooks = _section(entry, "hooks", f"plugins.entries.{PLUGIN_ID}")
    if hooks.get("allowConversationAccess") is not True:
        hooks["allowConversationAccess"] = True
        changes.append(f"plugins.entries.{PLUGIN_ID}.hooks.allowConversationAccess = true")
    if hooks.get("allowPromptInjection") is False:
        hooks["allowPromptInjection"] = True
        changes.append(f"plugins.entries.{PLUGIN_ID}.hooks.allowPromptInjection = true")
    if plugin_config:
        current = _section(entry, "config", f"plugins.entries.{PLUGIN_ID}")
        for key, value in plugin_config.items():
            if current.get(key) != value:
                current[key] = value
                shown = "***" if key == "token" else json.dumps(value)
                changes.append(f"plugins.entries.{PLUGIN_ID}.config.{key} = {shown}")
    return changes


def write_config_atomically(path: Path, config: dict[str, Any]) -> Path | None:
    """Back up ``path`` (``openclaw.json.metaclaw-<time>.bak``) and replace it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = 0o600
    if path.exists():
        mode = path.stat().st_mode & 0o777
        backup = path.with_name(f"{path.name}.metaclaw-{time.strftime('%Y%m%d-%H%M%S')}.bak")
        n = 1
        while backup.exists():
            backup = path.with_name(
                f"{path.name}.metaclaw-{time.strftime('%Y%m%d-%H%M%S')}-{n}.bak"
            )
            n += 1
        shutil.copy2(path, backup)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return backup


def grant_plugin(
    path: Path,
    *,
    plugin_dir: Path | None,
    plugin_config: dict[str, Any] | None = None,
) -> ConfigChange:
    """Make ``path`` load the plugin with conversation access; write only if something changes."""
    config = read_config(path)
    changes = apply_plugin_entry(config, plugin_dir=plugin_dir, plugin_config=plugin_config or {})
    result = ConfigChange(path=path, changes=changes)
    if changes:
        result.backup = write_config_atomically(path, config)
    return result


def link_with_openclaw(openclaw: str, plugin_dir: Path, env: dict[str, str] | None = None) -> str:
    """``openclaw plugins install --link DIR``: OpenClaw records and checks the plugin itself."""
    cmd = [
        openclaw,
        "plugins",
        "install",
        "--link",
        str(plugin_dir),
        "--force",
        "--accept-capabilities",
    ]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=LINK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"metaclaw: could not run {' '.join(cmd)}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise ConfigError(f"metaclaw: `{' '.join(cmd)}` failed (exit {done.returncode}):\n{tail}")
    return done.stdout
