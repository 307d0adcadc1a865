"""``metaclaw connect``: what it prints, what ``--write`` changes (idempotently, no keys), and
that ``--undo`` gives back the files as they were."""

from __future__ import annotations

import json
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from metaclaw_core.cli import app
from metaclaw_core.service.connect import MARKER, probe

runner = CliRunner()
URL = "http://127.0.0.1:30999"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("METACLAW_HOME", str(tmp_path / "metaclaw"))
    monkeypatch.setenv("METACLAW_LOAD_ENTRYPOINTS", "false")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-be-written")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-be-written")
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "OPENCLAW_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)


def connect(*args: str) -> Any:
    result = runner.invoke(app, ["connect", *args, "--url", URL, "--no-probe"])
    assert result.exit_code == 0, result.output
    return result


def no_secrets(root: Path) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            assert "must-not-be-written" not in f.read_text(errors="replace"), f


def test_claude_code_write_is_idempotent_and_undo_restores_the_file(tmp_path: Path) -> None:
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = {"model": "opus", "env": {"DISABLE_TELEMETRY": "1"}, "permissions": {"allow": []}}
    settings.write_text(json.dumps(original))

    printed = connect("claude-code").output
    assert f"export ANTHROPIC_BASE_URL={URL}" in printed
    assert json.loads(settings.read_text()) == original  # printing changes nothing

    first = connect("claude-code", "--write").output
    assert "env.ANTHROPIC_BASE_URL" in first
    data = json.loads(settings.read_text())
    assert data["env"] == {"DISABLE_TELEMETRY": "1", "ANTHROPIC_BASE_URL": URL}
    assert data["model"] == "opus" and data["permissions"] == {"allow": []}
    assert "already has these settings" in connect("claude-code", "--write").output
    no_secrets(tmp_path / "home")

    connect("claude-code", "--undo")
    assert json.loads(settings.read_text()) == original
    assert "nothing to undo" in connect("claude-code", "--undo").output


def test_claude_code_undo_puts_back_an_earlier_base_url(tmp_path: Path) -> None:
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gateway.example"}}))
    connect("claude-code", "--write")
    connect("claude-code", "--write")  # a second write does not lose what was there first
    assert json.loads(settings.read_text())["env"]["ANTHROPIC_BASE_URL"] == URL
    connect("claude-code", "--undo")
    assert json.loads(settings.read_text()) == {
        "env": {"ANTHROPIC_BASE_URL": "https://gateway.example"}
    }


def test_claude_code_settings_that_are_not_json_are_left_untouched(tmp_path: Path) -> None:
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    result = runner.invoke(app, ["connect", "claude-code", "--write", "--url", URL, "--no-probe"])
    assert result.exit_code == 1 and "not plain JSON" in result.output
    assert settings.read_text() == "{ not json"


def test_codex_profile_is_its_own_file_and_undo_removes_it(tmp_path: Path) -> None:
    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True)
    (codex / "config.toml").write_text('model = "gpt-5"\n')
    connect("codex", "--write")
    profile = codex / "metaclaw.config.toml"
    text = profile.read_text()
    assert text.startswith(MARKER)
    parsed = tomllib.loads(text)
    assert parsed["model_provider"] == "metaclaw"
    provider = parsed["model_providers"]["metaclaw"]
    assert provider["base_url"] == f"{URL}/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY"  # the key's name, never its value
    assert "already has these settings" in connect("codex", "--write").output
    assert (codex / "config.toml").read_text() == 'model = "gpt-5"\n'
    no_secrets(tmp_path / "home")
    connect("codex", "--undo")
    assert not profile.exists() and (codex / "config.toml").exists()


def test_codex_refuses_to_replace_a_profile_it_did_not_write(tmp_path: Path) -> None:
    profile = tmp_path / "home" / ".codex" / "metaclaw.config.toml"
    profile.parent.mkdir(parents=True)
    profile.write_text('model = "mine"\n')
    result = runner.invoke(app, ["connect", "codex", "--write", "--url", URL, "--no-probe"])
    assert result.exit_code == 1 and "not written by `metaclaw connect`" in result.output
    assert profile.read_text() == 'model = "mine"\n'


def test_codex_with_a_service_token_names_its_variable_not_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METACLAW_SERVICE__TOKEN", "tok-must-not-be-written")
    connect("codex", "--write")
    text = (tmp_path / "home" / ".codex" / "metaclaw.config.toml").read_text()
    assert 'env_key = "METACLAW_SERVICE__TOKEN"' in text
    assert "tok-must-not-be-written" not in text


def test_openclaw_write_grants_the_plugin_and_undo_takes_it_back(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".openclaw" / "openclaw.json"
    path.parent.mkdir(parents=True)
    original = {"plugins": {"allow": ["other"], "entries": {"other": {"enabled": True}}}}
    path.write_text(json.dumps(original))
    connect("openclaw", "--write")
    data = json.loads(path.read_text())
    entry = data["plugins"]["entries"]["metaclaw"]
    assert entry["enabled"] is True and entry["hooks"]["allowConversationAccess"] is True
    assert entry["config"] == {"serviceUrl": URL}
    assert data["plugins"]["allow"] == ["other", "metaclaw"]
    assert "already has these settings" in connect("openclaw", "--write").output
    connect("openclaw", "--undo")
    data = json.loads(path.read_text())
    assert data["plugins"]["allow"] == ["other"]
    assert data["plugins"]["entries"] == {"other": {"enabled": True}}
    assert data["plugins"].get("load", {}).get("paths", []) == []


class _Health(BaseHTTPRequestHandler):
    readyz = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/readyz" and self.readyz:
            status, body = 200, {"ready": True, "generation": 4}
        elif self.path == "/healthz":
            status, body = 200, {"ok": True, "ready": True, "generation": 2}
        else:
            status, body = 404, {"error": {"message": "no"}}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def health() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_probe_prefers_readyz_and_falls_back_to_healthz(health: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{health.server_address[1]}"
    assert probe(url, None) == f"metaclaw serve at {url}: ready, skill generation 4 (/readyz)"
    _Health.readyz = False
    try:
        assert probe(url, None).endswith("ready, skill generation 2 (/healthz)")
    finally:
        _Health.readyz = True
    health.shutdown()
    health.server_close()
    assert "not reachable" in probe(url, None)
