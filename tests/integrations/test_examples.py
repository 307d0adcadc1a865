"""The three examples run offline by default, and reach a real (here: scripted) model on request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.slow  # each example loads the embedder in a fresh process

ROOT = Path(__file__).resolve().parents[2]
REAL_MODEL_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "METACLAW_MODEL", "METACLAW_HOME")


def run_example(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in REAL_MODEL_VARS}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "HF_HUB_OFFLINE": "1", **env},
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("langchain_agent.py", ["SCRIPTED", "## arithmetic-with-tools", "-> add("]),
        ("langgraph_graph.py", ["SCRIPTED", "[skills]", "generation 2  skills"]),
        (
            "llamaindex_query.py",
            ["SCRIPTED", "INJECTED: cite-documents", "skills block inside: True"],
        ),
    ],
)
def test_example_runs_offline_and_prints_what_was_injected_and_captured(
    name: str, expected: list[str], tmp_path: Path
) -> None:
    done = run_example(name, METACLAW_HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr[-2000:]
    for text in expected:
        assert text in done.stdout
    assert "captured trajectories" in done.stdout


def test_llamaindex_example_uses_a_real_model_through_the_openai_sdk(tmp_path: Path) -> None:
    with ScriptedOpenAI(default=Reply("The documents say: rust.md and py.md.")) as server:
        done = run_example(
            "llamaindex_query.py",
            METACLAW_HOME=str(tmp_path / "home"),
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            METACLAW_MODEL="scripted-model",
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "scripted-model (real" in done.stdout
        assert "The documents say: rust.md and py.md." in done.stdout
        prompt = server.requests[0].json["messages"][0]["content"]
        assert "<metaclaw-skills>" in prompt and "## cite-documents" in prompt


def test_langchain_example_uses_a_real_model_through_langchain_openai(tmp_path: Path) -> None:
    # langchain-openai is a dev dependency (the benchmark's agent uses it), so the example's
    # real-model path runs here: ChatOpenAI -> the scripted server, skills in its prompt.
    with ScriptedOpenAI(default=Reply("42, and Paris is sunny.")) as server:
        done = run_example(
            "langchain_agent.py",
            METACLAW_HOME=str(tmp_path / "home"),
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            METACLAW_MODEL="scripted-model",
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "scripted-model (real)" in done.stdout
        first = server.requests[0]
        assert first.headers["authorization"] == "Bearer test-key"
        prompt = first.json["messages"][0]["content"]
        assert "<metaclaw-skills>" in prompt and "## arithmetic-with-tools" in prompt
        assert {t["function"]["name"] for t in first.json["tools"]} == {"add", "weather"}
