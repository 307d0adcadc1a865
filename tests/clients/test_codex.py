"""The Codex CLI (``codex exec``, the real npm package) with a custom provider whose base URL
is the proxy, to a scripted Responses upstream: a learned skill reaches the model's system
prompt (Codex's leading developer item), the turn is captured with its function call and its
output, and the client prints what the upstream said."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from metaclaw_core.cli import app
from metaclaw_core.plugins.render import BLOCK_START
from tests.clients.conftest import CodingAgents, run_agent
from tests.service.conftest import AgentService, serve_agents
from tests.support.scripted_http import RecordedRequest, ScriptedCall, ScriptedReply

TASK = "Convert 26.2 miles to kilometres with the shell"
FINAL = "26.2 miles is 42.16 km (factor 1.609)."
COMMAND = "echo 42.16-from-the-shell"


def responder(req: RecordedRequest) -> ScriptedReply:
    """The model: run one command, then answer."""
    items = req.json.get("input") or []
    if any(i.get("type") == "function_call_output" for i in items):
        return ScriptedReply(FINAL)
    return ScriptedReply(None, tool_calls=[ScriptedCall("exec_command", {"cmd": COMMAND})])


@pytest.fixture
def proxied(minilm: Any, tmp_path: Path) -> Iterator[AgentService]:
    with serve_agents(minilm, tmp_path / "metaclaw", responder=responder) as svc:
        yield svc


def codex_home(path: Path, base_url: str) -> Path:
    path.mkdir(parents=True)
    (path / "config.toml").write_text(
        f"""model = "scripted-model"
model_provider = "metaclaw"
check_for_update_on_startup = false

[model_providers.metaclaw]
name = "MetaClaw proxy"
base_url = "{base_url}"
wire_api = "responses"
env_key = "METACLAW_SCRIPTED_KEY"

[features]
plugins = false
apps = false
remote_plugin = false

[analytics]
enabled = false
"""
    )
    return path


def test_codex_turn_gets_the_skill_and_is_captured_with_its_function_call(
    coding_agents: CodingAgents, proxied: AgentService, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = coding_agents.env(
        tmp_path / "home",
        CODEX_HOME=str(codex_home(tmp_path / "codex", f"{proxied.url}/v1")),
        METACLAW_SCRIPTED_KEY="k-scripted",
    )
    done = run_agent([str(coding_agents.codex), "exec", "--skip-git-repo-check", TASK], env, work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == FINAL  # the client's output is what the upstream said

    first, second = proxied.responses.posts()[:2]
    assert first.headers["authorization"] == "Bearer k-scripted"
    body = first.json
    assert "instructions" not in body
    lead = body["input"][0]
    assert lead["role"] == "developer"
    assert lead["content"][-1]["text"].startswith(BLOCK_START)
    assert "## unit-conversion" in lead["content"][-1]["text"]
    assert json.dumps(body).count(BLOCK_START) == 1
    assert any(i.get("type") == "function_call_output" for i in second.json["input"])

    session = body["prompt_cache_key"]
    found = proxied.http.get("/v1/trajectories", params={"session_id": session}).json()
    full = [proxied.http.get(f"/v1/trajectories/{t['id']}").json() for t in found]
    assert len(full) == 2 and all(t["query"] == TASK for t in full)
    answer, call = full  # newest first
    (tc,) = call["output"]["tool_calls"]
    assert tc["name"] == "exec_command" and json.loads(tc["arguments"]) == {"cmd": COMMAND}
    assert call["injected_skills"] == ["unit-conversion"] and call["error"] is None
    assert call["framework"] == "responses-proxy"
    assert answer["output"]["text"] == FINAL
    tool_msgs = [m for m in answer["messages"] if m["role"] == "tool"]
    assert tool_msgs and tool_msgs[-1]["content"]  # the command's output, as Codex sent it
    assert answer["generation"] == proxied.engine.generation


def test_codex_reaches_the_proxy_through_the_profile_connect_wrote(
    coding_agents: CodingAgents, proxied: AgentService, tmp_path: Path
) -> None:
    home = codex_home(tmp_path / "codex", "http://127.0.0.1:9/unused")
    profile = home / "metaclaw.config.toml"
    result = CliRunner().invoke(
        app, ["connect", "codex", "--write", "--url", proxied.url, "--config", str(profile)]
    )
    assert result.exit_code == 0, result.output
    work = tmp_path / "work"
    work.mkdir()
    env = coding_agents.env(
        tmp_path / "home", CODEX_HOME=str(home), OPENAI_API_KEY="sk-scripted-openai"
    )
    done = run_agent(
        [str(coding_agents.codex), "exec", "--profile", "metaclaw", "--skip-git-repo-check", TASK],
        env,
        work,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == FINAL
    first = proxied.responses.posts()[0]
    assert first.headers["authorization"] == "Bearer sk-scripted-openai"
    assert first.json["input"][0]["content"][-1]["text"].startswith(BLOCK_START)
