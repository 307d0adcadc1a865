"""`metaclaw openclaw install` edits ~/.openclaw/openclaw.json safely: only our entry, an
existing allow-list extended and never replaced, a backup, an atomic write, idempotent."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaclaw_core.cli import app
from metaclaw_core.errors import ConfigError
from metaclaw_core.service.openclaw import REPO_PLUGIN_DIR, find_plugin_dir, grant_plugin

EXISTING = {
    "agents": {"defaults": {"model": {"primary": "local/qwen"}}},
    "plugins": {
        "allow": ["memory-core", "voice-call"],
        "load": {"paths": ["/opt/other-plugin"]},
        "entries": {
            "voice-call": {"enabled": True, "config": {"provider": "twilio"}},
            "metaclaw": {"config": {"topK": 3}},
        },
    },
}


def write(path: Path, data: object, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    os.chmod(path, mode)


def test_grant_keeps_other_plugins_and_extends_the_allow_list(tmp_path: Path) -> None:
    path = tmp_path / ".openclaw" / "openclaw.json"
    write(path, EXISTING, 0o640)
    before = path.read_text()
    change = grant_plugin(
        path, plugin_dir=REPO_PLUGIN_DIR, plugin_config={"serviceUrl": "http://127.0.0.1:9"}
    )
    data = json.loads(path.read_text())
    plugins = data["plugins"]
    assert plugins["allow"] == ["memory-core", "voice-call", "metaclaw"]
    assert plugins["load"]["paths"] == ["/opt/other-plugin", str(REPO_PLUGIN_DIR)]
    assert plugins["entries"]["voice-call"] == EXISTING["plugins"]["entries"]["voice-call"]
    ours = plugins["entries"]["metaclaw"]
    assert ours["enabled"] is True
    assert ours["hooks"]["allowConversationAccess"] is True
    assert ours["config"] == {"topK": 3, "serviceUrl": "http://127.0.0.1:9"}  # topK kept
    assert data["agents"] == EXISTING["agents"]
    assert change.backup is not None and change.backup.read_text() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".openclaw.json")]

    again = grant_plugin(
        path, plugin_dir=REPO_PLUGIN_DIR, plugin_config={"serviceUrl": "http://127.0.0.1:9"}
    )
    assert again.changes == [] and again.backup is None
    assert len(list(path.parent.glob("openclaw.json.metaclaw-*.bak"))) == 1


def test_no_allow_list_is_not_created_and_a_missing_file_is(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    change = grant_plugin(path, plugin_dir=None, plugin_config={})
    data = json.loads(path.read_text())
    assert "allow" not in data["plugins"]
    assert data["plugins"]["entries"]["metaclaw"]["hooks"] == {"allowConversationAccess": True}
    assert change.backup is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "text",
    [
        '{\n  // a JSON5 comment\n  "plugins": {}\n}',
        "[1, 2]",
        '{"plugins": {"entries": []}}',
    ],
)
def test_a_config_it_cannot_edit_safely_is_left_untouched(tmp_path: Path, text: str) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        grant_plugin(path, plugin_dir=None, plugin_config={})
    assert path.read_text() == text
    assert list(tmp_path.iterdir()) == [path]


def test_cli_install_without_linking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METACLAW_SERVICE__TOKEN", "tok-123")
    monkeypatch.setenv("METACLAW_SERVICE__PORT", "30123")
    monkeypatch.setenv("METACLAW_HOME", str(tmp_path / "mc"))
    path = tmp_path / "openclaw.json"
    write(path, EXISTING)
    result = CliRunner().invoke(
        app,
        ["openclaw", "install", "--no-link", "--config", str(path), "--top-k", "4"],
    )
    assert result.exit_code == 0, result.output
    assert "allowConversationAccess = true" in result.output
    assert "tok-123" not in result.output  # the token goes into the file, not the terminal
    config = json.loads(path.read_text())["plugins"]["entries"]["metaclaw"]["config"]
    assert config == {"topK": 4, "serviceUrl": "http://127.0.0.1:30123", "token": "tok-123"}
    assert find_plugin_dir() == REPO_PLUGIN_DIR


def test_cli_install_explains_a_missing_openclaw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METACLAW_HOME", str(tmp_path / "mc"))
    result = CliRunner().invoke(
        app,
        [
            "openclaw",
            "install",
            "--openclaw",
            str(tmp_path / "no-openclaw"),
            "--config",
            str(tmp_path / "c.json"),
        ],
    )
    assert result.exit_code == 1
    assert not (tmp_path / "c.json").exists()
