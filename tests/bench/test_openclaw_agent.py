"""`--agent openclaw`: the real OpenClaw (headless `openclaw agent --local` turns) answers the
rounds of a tiny suite, the scripted OpenAI-compatible server is its model, and in skills
mode the real MetaClaw plugin talks to a service around the run's own engine.

One skills run of five OpenClaw turns (about two minutes on two cores): a file round whose
wrong answer becomes a skill, a round whose prompt carries that skill and is answered right, a
model error after a feedback turn, a turn that times out. The cheap checks (the config of a
baseline agent, reading turns back, the CLI without OpenClaw) run without any turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.bench.openclaw_agent import (
    ALLOWED_TOOLS,
    ModelCall,
    OpenClawAgent,
    OpenClawInstall,
    Turn,
    read_turn,
    record_actions,
    transcript_of,
)
from metaclaw_core.bench.runner import BenchError, BenchRun, RoundResult, RunConfig
from metaclaw_core.bench.suite import load_suite
from metaclaw_core.bench.workspace import ActionLog
from metaclaw_core.service.openai_format import content_text
from tests.bench.suites import TIME_FEEDBACK, day01, day02, engine_factory, write_suite
from tests.openclaw import conftest as openclaw_conftest
from tests.support.scripted_openai import (
    RecordedRequest,
    Reply,
    ScriptedOpenAI,
    ToolCallReply,
    error_reply,
)

openclaw_tools = openclaw_conftest.openclaw_tools  # Node 24 + openclaw, or a skip
OpenClawTools = openclaw_conftest.OpenClawTools

TURN_TIMEOUT_S = 30  # OpenClaw's --timeout; the scripted turns take a few seconds of it
SLOW_REPLY_S = 45
METACLAW = Path(sys.executable).with_name("metaclaw")


def _multi_choice(rid: str, marker: str) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "multi_choice",
        "question": f"{marker}: which option is a valid meeting time?\n"
        "A. 2026-03-16T09:30:00+08:00\nB. 09:30\nAnswer using \\bbox{X}.",
        "feedback": {"correct": "Right.", "options": {"A": "A is valid.", "B": "B is not."}},
        "eval": {"options": {"A": "x", "B": "y"}, "answer": ["A"]},
    }


def _days() -> list[dict[str, Any]]:
    first = day01()
    first["rounds"] = first["rounds"][:1]  # r1: the file round
    second = day02()  # r1: right only when the lesson of day01 is in the prompt
    second["rounds"].append(_multi_choice("r2", "MODEL-ERROR"))
    return [first, second, {"id": "day03", "rounds": [_multi_choice("r1", "SLOW-MODEL")]}]


def _system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return content_text(first["content"]) if first["role"] in ("system", "developer") else ""


def model(req: RecordedRequest) -> Reply:
    """OpenClaw's scripted model: wrong at first, right once the lesson is in its prompt."""
    body = req.json
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply("Done.")
    text = content_text(last["content"])
    if "Feedback on your previous answer" in text:
        return Reply("Noted.")
    if "day01/out.json" in text:
        args = json.dumps({"path": "day01/out.json", "content": json.dumps({"when": "09:30"})})
        return Reply(None, tool_calls=[ToolCallReply("write", args)])
    if "MODEL-ERROR" in text:
        # (an invalid-request body: OpenClaw surfaces it at once; a server_error it retries)
        return error_reply(500, "the scripted model broke")
    if "SLOW-MODEL" in text:
        return Reply("\\bbox{A}", delay_s=SLOW_REPLY_S)
    if "ISO 8601" in text:
        return Reply("\\bbox{B}" if TIME_FEEDBACK in _system(body) else "\\bbox{A}")
    return Reply("I don't know.")


def _install(tools: OpenClawTools) -> OpenClawInstall:
    return OpenClawInstall(node_bin=tools.node_bin, openclaw=tools.openclaw)


def _model_config(server: ScriptedOpenAI, api_key: str = "not-needed") -> ModelConfig:
    return ModelConfig(
        model="scripted-model", base_url=server.base_url, api_key=api_key, timeout_s=TURN_TIMEOUT_S
    )


@pytest.mark.slow
def test_openclaw_answers_learns_through_the_plugin_and_survives_failing_turns(
    openclaw_tools: OpenClawTools,
    tmp_path: Path,
    minilm: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # must stay untouched
    suite = load_suite(write_suite(tmp_path / "suite", _days()))
    run_dir = tmp_path / "run"
    queries: dict[str, list[str]] = {}
    with ScriptedOpenAI(responder=model) as server:
        install = _install(openclaw_tools)
        bench = BenchRun(
            suite,
            run_dir,
            RunConfig(
                mode="skills", model=_model_config(server), check_timeout_s=20, agent="openclaw"
            ),
            agent_factory=lambda config, engine: OpenClawAgent(
                config, engine, run_dir, install=install
            ),
            engine_factory=engine_factory(minilm),
        )

        def seen(r: RoundResult) -> None:  # the captures' queries, while the engine is open
            got = [bench.engine.trajectories.get(t) for t in r.trajectory_ids]
            queries[f"{r.day}/{r.round}"] = [t.query for t in got if t is not None]

        bench.on_round = seen
        summary = bench.run()
        requests = [r.json for r in server.chat_requests()]

    rounds = {
        f"{p.parent.name}/{p.stem}": json.loads(p.read_text())
        for p in sorted((run_dir / "days").glob("*/r*.json"))
    }
    assert summary["days_complete"] == 3 and summary["rounds"] == 4
    assert not (tmp_path / "user-home").exists()

    # day01/r1: OpenClaw's own `write` tool wrote the wrong value; the check failed
    r1 = rounds["day01/r1"]
    assert r1["error"] is None and r1["score"] == 0.0 and "check failed" in r1["reason"]
    assert [a["tool"] for a in r1["actions"]] == ["write"] and r1["escapes"] == []
    written = run_dir / "workspaces" / "day01" / "day01" / "out.json"
    assert json.loads(written.read_text()) == {"when": "09:30"}
    assert r1["transcript"][-1] == {"role": "ai", "content": "Done."}
    assert r1["model_calls"] == 2 and r1["trajectory_ids"] and r1["injected"] == []
    agent = r1["agent"]
    assert agent["name"] == "openclaw" and agent["metaclaw_plugin"] is True
    assert agent["tools_allowed"] == list(ALLOWED_TOOLS)
    assert set(agent["tools_offered"]) <= set(ALLOWED_TOOLS) and "write" in agent["tools_offered"]
    assert agent["skills_block"] is False
    offered = {t["function"]["name"] for body in requests for t in body.get("tools", [])}
    assert offered <= set(ALLOWED_TOOLS)  # no exec, browser, web_fetch, sessions, ...

    # day02/r1: the correction became a skill; the plugin put it into OpenClaw's prompt
    r2 = rounds["day02/r1"]
    assert r2["answer"] == "\\bbox{B}" and r2["score"] == 1.0 and r2["error"] is None
    assert r2["injected"] and r2["generation"] > r1["generation"]
    assert r2["agent"]["skills_block"] is True
    iso = [b for b in requests if "ISO 8601" in content_text(b["messages"][-1]["content"])]
    assert len(iso) == 1 and "<metaclaw-skills>" in _system(iso[0])
    assert TIME_FEEDBACK in _system(iso[0])
    first = next(b for b in requests if "day01/out.json" in json.dumps(b["messages"][-1]))
    assert "<metaclaw-skills>" not in _system(first)
    (query,) = queries["day02/r1"]  # what the plugin retrieved for: the question alone
    assert query.startswith("Which of these meeting time values")

    # day02/r2: the feedback went first, as a turn of the same session; then a model error
    r3 = rounds["day02/r2"]
    assert r3["previous_feedback"] == "Right."
    assert [t["kind"] for t in r3["agent"]["turns"]] == ["feedback", "question"]
    assert r3["score"] == 0.0 and r3["answer"] == ""
    assert "500" in r3["error"] and "the scripted model broke" in r3["error"]
    said = [m["content"] for m in r3["transcript"] if m["role"] == "human"]
    assert "Feedback on your previous answer: Right." in said[0] and "MODEL-ERROR" in said[-1]
    assert all("MODEL-ERROR" in q and "Feedback" not in q for q in queries["day02/r2"])

    # day03/r1: OpenClaw's --timeout ended the turn; the round scores 0 and says why
    r4 = rounds["day03/r1"]
    assert r4["score"] == 0.0 and r4["answer"] == ""
    assert r4["error"] and "timed out" in r4["error"].lower()
    assert r4["agent"]["turns"][0]["seconds"] < TURN_TIMEOUT_S + 60

    # the run's own OpenClaw home: the plugin granted, pointed at the run's service
    config = json.loads((run_dir / "openclaw-home" / ".openclaw" / "openclaw.json").read_text())
    entry = config["plugins"]["entries"]["metaclaw"]
    assert entry["enabled"] is True and entry["hooks"]["allowConversationAccess"] is True
    assert entry["config"]["serviceUrl"].startswith("http://127.0.0.1:")
    assert config["agents"]["defaults"]["workspace"] == str(
        (run_dir / "workspaces" / "day03").resolve()
    )
    assert config["tools"]["fs"]["workspaceOnly"] is True


def test_a_baseline_openclaw_has_no_plugin_and_only_file_tools(
    openclaw_tools: OpenClawTools, tmp_path: Path
) -> None:
    with ScriptedOpenAI() as server:
        agent = OpenClawAgent(
            _model_config(server, api_key="sk-never-on-disk"),
            None,
            tmp_path / "run",
            install=_install(openclaw_tools),
        )
        try:
            ws = tmp_path / "ws"
            ws.mkdir()
            agent._configure(ws)
            raw = agent.config_path.read_text()
            config = json.loads(raw)
            env = agent.env
        finally:
            agent.close()
    assert "plugins" not in config and agent.service is None
    assert config["agents"]["defaults"]["workspace"] == str(ws.resolve())
    assert config["tools"]["allow"] == list(ALLOWED_TOOLS)
    assert "group:runtime" in config["tools"]["deny"] and "group:web" in config["tools"]["deny"]
    provider = config["models"]["providers"]["bench"]
    assert provider["baseUrl"].startswith("http://127.0.0.1:")  # the recording pass-through
    assert "sk-never-on-disk" not in raw
    assert env["HOME"] == str((tmp_path / "run" / "openclaw-home").resolve())
    assert not any(k.startswith("OPENCLAW_") and k != "OPENCLAW_NO_AUTO_UPDATE" for k in env)


def test_a_resume_with_another_agent_is_refused(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite"))
    config = RunConfig(mode="baseline", model=ModelConfig(model="m", base_url="http://x/v1"))
    BenchRun(suite, tmp_path / "run", config)._check_or_write_manifest()
    other = RunConfig(
        mode="baseline", model=ModelConfig(model="m", base_url="http://x/v1"), agent="openclaw"
    )
    with pytest.raises(BenchError, match="agent: 'langchain' there, 'openclaw' now"):
        BenchRun(suite, tmp_path / "run", other)._check_or_write_manifest()


def test_turns_are_read_back_without_running_openclaw(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    args = json.dumps({"path": "../out.txt", "content": "x"})
    write = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": args}}
    call = ModelCall(
        request={
            "messages": [
                {"role": "system", "content": "big prompt"},
                {"role": "user", "content": [{"type": "text", "text": "Do it"}]},
                {"role": "assistant", "content": None, "tool_calls": [write]},
                {"role": "tool", "tool_call_id": "c1", "content": "Path escapes sandbox root"},
            ]
        },
        text="Sorry.",
        finished=True,
    )
    transcript = transcript_of([call])
    assert [m["role"] for m in transcript] == ["human", "ai", "tool", "ai"]
    assert transcript[2]["tool"] == "write" and transcript[-1]["content"] == "Sorry."
    log = ActionLog()
    record_actions(transcript, ws, log)
    assert log.actions[0]["result"] == "Path escapes sandbox root"
    assert log.wrote_outside == ["../out.txt"]

    ok = Turn("question", calls=[call])
    read_turn(ok, 0, json.dumps({"payloads": [{"text": "\\bbox{A}"}], "meta": {}}), "")
    assert ok.answer == "\\bbox{A}" and ok.error is None
    failed = Turn("question")
    out = {"ok": False, "error": {"type": "cli_error", "message": "LLM request failed"}}
    read_turn(failed, 1, json.dumps(out), "")
    assert failed.answer == "" and failed.error == "openclaw exited with 1: LLM request failed"
    timed_out = Turn("question")
    payload = {"text": "Request timed out before a response was generated.", "isError": True}
    read_turn(timed_out, 1, "log line\n" + json.dumps({"payloads": [payload]}), "")
    assert timed_out.answer == "" and "timed out" in (timed_out.error or "")
    garbage = Turn("question")
    read_turn(garbage, 0, "not json", "")
    assert garbage.error == "no JSON output: not json"


def test_the_cli_says_how_to_install_openclaw_when_it_is_missing(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite")
    env = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    env.update(METACLAW_OPENCLAW_CACHE=str(tmp_path / "no-openclaw"), METACLAW_HOME=str(tmp_path))
    done = subprocess.run(
        [str(METACLAW), "bench", "run", str(suite), "--agent", "openclaw", "--mode", "baseline"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "scripts/setup-openclaw.sh" in done.stderr and "Node 24" in done.stderr
    assert not (tmp_path / "bench-runs").exists()  # nothing started
    help_text = subprocess.run(
        [str(METACLAW), "bench", "run", "--help"],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    assert "--agent" in help_text and "openclaw" in help_text
