"""Claude Code (``claude -p``, the real npm package) through ``/v1/messages`` to a scripted
Anthropic upstream: a learned skill reaches the model's system prompt, the turn is captured
with its tool call and the tool's result, and the client prints what the upstream said."""

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


def _has_tool_result(body: dict[str, Any]) -> bool:
    content = body["messages"][-1].get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def responder(req: RecordedRequest) -> ScriptedReply:
    """The model: run one shell command, then answer (side calls get a short answer)."""
    body = req.json
    if _has_tool_result(body):
        return ScriptedReply(FINAL)
    if any(t.get("name") == "Bash" for t in body.get("tools") or []):
        return ScriptedReply(
            None,
            tool_calls=[ScriptedCall("Bash", {"command": COMMAND, "description": "convert"})],
        )
    return ScriptedReply("ok")


@pytest.fixture
def proxied(minilm: Any, tmp_path: Path) -> Iterator[AgentService]:
    with serve_agents(minilm, tmp_path / "metaclaw", responder=responder) as svc:
        yield svc


@pytest.mark.parametrize("bare", [True, False], ids=["bare", "full-prompt"])
def test_claude_code_turn_gets_the_skill_and_is_captured_with_its_tool_call(
    coding_agents: CodingAgents, proxied: AgentService, tmp_path: Path, bare: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = coding_agents.env(
        tmp_path / "home",
        ANTHROPIC_BASE_URL=proxied.url,
        ANTHROPIC_API_KEY="sk-ant-scripted",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    argv = [str(coding_agents.claude), "-p", TASK, "--output-format", "json", "--max-turns", "3"]
    done = run_agent([*argv, "--bare"] if bare else argv, env, work)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    result = json.loads(done.stdout)
    assert result["result"] == FINAL  # the client's output is what the upstream said

    posts = [r for r in proxied.anthropic.posts() if r.json.get("tools")]
    first, second = posts[0], posts[-1]
    assert first.path == "/v1/messages?beta=true"
    assert first.headers["x-api-key"] == "sk-ant-scripted"
    system = first.json["system"]
    assert isinstance(system, list) and system[-1]["text"].startswith(BLOCK_START)
    assert "## unit-conversion" in system[-1]["text"]
    assert all("cache_control" not in b for b in system[-1:])
    assert any("cache_control" in b for b in system[:-1])  # the client's breakpoints kept
    assert _has_tool_result(second.json)

    found = proxied.http.get("/v1/trajectories", params={"limit": 50}).json()
    full = [proxied.http.get(f"/v1/trajectories/{t['id']}").json() for t in found]
    turns = [t for t in full if t["query"] == TASK]
    assert len(turns) >= 2, [t["query"] for t in full]
    call = next(t for t in turns if t["output"]["tool_calls"])
    (tc,) = call["output"]["tool_calls"]
    assert tc["name"] == "Bash" and json.loads(tc["arguments"])["command"] == COMMAND
    assert call["injected_skills"] == ["unit-conversion"]
    assert call["framework"] == "anthropic-proxy" and call["error"] is None
    answer = next(t for t in turns if t["output"]["text"] == FINAL)
    tool_msgs = [m for m in answer["messages"] if m["role"] == "tool"]
    assert tool_msgs and "42.16-from-the-shell" in tool_msgs[-1]["content"]
    assert answer["generation"] == proxied.engine.generation


def test_claude_code_reaches_the_proxy_with_the_settings_connect_wrote(
    coding_agents: CodingAgents, proxied: AgentService, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    result = CliRunner().invoke(
        app,
        ["connect", "claude-code", "--write", "--url", proxied.url, "--config", str(settings)],
    )
    assert result.exit_code == 0, result.output
    assert "ready" in result.output.splitlines()[0]  # it probed the live service
    work = tmp_path / "work"
    work.mkdir()
    env = coding_agents.env(
        home, ANTHROPIC_API_KEY="sk-ant-scripted", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1"
    )  # no ANTHROPIC_BASE_URL: the settings file is what sends it to the proxy
    done = run_agent(
        [str(coding_agents.claude), "-p", TASK, "--output-format", "json", "--bare"], env, work
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    assert json.loads(done.stdout)["result"] == FINAL
    assert proxied.anthropic.posts()[0].json["system"][-1]["text"].startswith(BLOCK_START)
