"""End to end with the real OpenClaw: `metaclaw openclaw install` links the plugin, a real
`metaclaw serve` answers it, the scripted server is OpenClaw's model provider, and headless
`openclaw agent --local` turns run with their own HOME.

One turn with the service up: the model request carries the skills block and the turn is
captured under its session id. One with the service down: the turn still succeeds, without
skills. About a minute on two cores.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.openclaw.conftest import OpenClawTools
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.slow

METACLAW = Path(sys.executable).with_name("metaclaw")
ANSWER = "Paris is the capital of France."
QUESTION = "What is the capital of France?"
SKILL = {
    "name": "capital-cities",
    "description": "Answering questions about the capital cities of countries",
    "body": "Name the capital first, then give one sentence of context about it.",
}
TURN_TIMEOUT_S = 240


@dataclass
class RunningService:
    proc: subprocess.Popen[str]
    url: str
    log: list[str]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            out, _ = self.proc.communicate(timeout=60)
            self.log.append(out or "")


def start_service(home: Path) -> RunningService:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", METACLAW_HOME=str(home))
    proc = subprocess.Popen(
        [str(METACLAW), "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    log: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, "metaclaw serve exited: " + "".join(log)
        log.append(line)
        if m := re.search(r"serving on (http://\S+)", line):
            return RunningService(proc, m.group(1), log)
    proc.kill()
    raise AssertionError("metaclaw serve did not start: " + "".join(log))


def openclaw_config(upstream: ScriptedOpenAI) -> dict[str, Any]:
    return {
        "agents": {"defaults": {"model": {"primary": "scripted/scripted-model"}}},
        "models": {
            "mode": "merge",
            "providers": {
                "scripted": {
                    "baseUrl": upstream.base_url,
                    "apiKey": "sk-scripted",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "scripted-model",
                            "name": "Scripted",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 32000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
    }


@pytest.fixture
def upstream() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(default=Reply(ANSWER), chunk_delay_s=0.01) as server:
        yield server


def run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def agent_turn(
    tools: OpenClawTools, env: dict[str, str], session: str
) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    done = run(
        [
            str(tools.openclaw),
            "agent",
            "--local",
            "--agent",
            "main",
            "--session-id",
            session,
            "--message",
            QUESTION,
            "--json",
            "--timeout",
            "120",
        ],
        env,
        TURN_TIMEOUT_S,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, (
        f"openclaw agent failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return json.loads(done.stdout), took


def system_prompt(request_json: dict[str, Any]) -> str:
    first = request_json["messages"][0]
    assert first["role"] in ("system", "developer")
    content = first["content"]
    return content if isinstance(content, str) else json.dumps(content)


def test_openclaw_turns_get_skills_are_captured_and_survive_the_service_going_down(
    openclaw_tools: OpenClawTools, upstream: ScriptedOpenAI, tmp_path: Path
) -> None:
    service = start_service(tmp_path / "metaclaw")
    try:
        with httpx.Client(base_url=service.url, timeout=30) as api:
            assert api.post("/v1/skills", json={"skills": [SKILL]}).status_code == 201
            deadline = time.monotonic() + 120
            # /readyz: 503 while the skill library or the embedder loads in the background
            while (ready := api.get("/readyz")).status_code != 200:
                assert ready.status_code == 503, ready.text
                assert time.monotonic() < deadline, f"the service never became ready: {ready.text}"
                time.sleep(0.2)

            home = tmp_path / "openclaw-home"
            config = home / ".openclaw" / "openclaw.json"
            config.parent.mkdir(parents=True)
            config.write_text(json.dumps(openclaw_config(upstream), indent=2))
            env = openclaw_tools.env(home, tmp_path / "tmp")

            # Our installer, driving the real `openclaw plugins install --link`.
            installed = run(
                [
                    str(METACLAW),
                    "openclaw",
                    "install",
                    "--openclaw",
                    str(openclaw_tools.openclaw),
                    "--config",
                    str(config),
                    "--service-url",
                    service.url,
                ],
                {**env, "HF_HUB_OFFLINE": "1"},
                300,
            )
            assert installed.returncode == 0, installed.stdout + installed.stderr
            entry = json.loads(config.read_text())["plugins"]["entries"]["metaclaw"]
            assert entry["hooks"]["allowConversationAccess"] is True
            assert entry["config"]["serviceUrl"] == service.url

            inspected = run(
                [
                    str(openclaw_tools.openclaw),
                    "plugins",
                    "inspect",
                    "metaclaw",
                    "--runtime",
                    "--json",
                ],
                env,
                120,
            )
            assert inspected.returncode == 0, inspected.stderr[-3000:]
            runtime = json.loads(inspected.stdout)
            assert runtime["plugin"]["status"] == "loaded"
            assert {h["name"] for h in runtime["typedHooks"]} == {
                "before_prompt_build",
                "agent_end",
                "session_end",
            }
            assert runtime["commands"] == ["metaclaw"]

            # A turn with the service up: skills reach the model, the turn is captured.
            out, took_up = agent_turn(openclaw_tools, env, "e2e-up")
            assert out["payloads"][0]["text"] == ANSWER
            sent = upstream.chat_requests()[-1].json
            assert sent["stream"] is True
            prompt = system_prompt(sent)
            assert "<metaclaw-skills>" in prompt and "## capital-cities" in prompt
            assert prompt.rstrip().index("</metaclaw-skills>") > len(prompt) // 2  # at the end
            users = [json.dumps(m["content"]) for m in sent["messages"] if m["role"] == "user"]
            assert not any("metaclaw-skills" in u for u in users)

            deadline = time.monotonic() + 15
            while not (
                found := api.get("/v1/trajectories", params={"session_id": "e2e-up"}).json()
            ):
                assert time.monotonic() < deadline, "the turn was not captured"
                time.sleep(0.2)
            (row,) = found
            t = api.get(f"/v1/trajectories/{row['id']}").json()
            assert t["framework"] == "openclaw" and t["session_id"] == "e2e-up"
            assert t["injected_skills"] == ["capital-cities"]
            assert t["query"] == QUESTION
            assert t["output"]["text"] == ANSWER and t["output"]["finish_reason"] == "stop"
            assert t["messages"][-1]["role"] == "user"
            assert QUESTION in t["messages"][-1]["content"]
            assert t["metadata"]["success"] is True and t["error"] is None
    finally:
        service.stop()
    assert service.proc.returncode == 0, "".join(service.log)

    # The service is gone: the turn goes on without skills, and not noticeably slower.
    before = len(upstream.chat_requests())
    out, took_down = agent_turn(openclaw_tools, env, "e2e-down")
    assert out["payloads"][0]["text"] == ANSWER
    sent = upstream.chat_requests()[before:][-1].json
    assert "<metaclaw-skills>" not in system_prompt(sent)
    assert took_down < took_up + 20, (took_up, took_down)
