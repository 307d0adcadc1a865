"""What every benchmark agent shares: its model's settings, its result, the system prompt, and
reading tool calls a small model wrote as text (``<tool_call>{…}</tool_call>`` or a fenced
JSON object).

The default agent (LangChain ``create_agent`` with workspace file tools and the MetaClaw
middleware) lives with the LangChain adapter, ``metaclaw_langchain.bench_agent``, and is found
through the ``metaclaw.bench_agents`` entry point (:func:`agent_factory`), so the core never
imports an adapter.

Each round is a fresh conversation: the system prompt (the workspace's bootstrap files), the
previous round's feedback as its own user message, then the question (so the task text the
engine retrieves skills for — and corrections describe — is the question alone).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md")
SYSTEM_HEAD = (
    "You work in a workspace folder through three tools: list_files(path), read_file(path) "
    "and write_file(path, content). Paths are relative to the workspace (e.g. day01/notes.md). "
    "Read the files a task mentions before changing them; to change a file, write its whole "
    "new content. Answer the user directly when no file work is needed."
)
FEEDBACK_PREFIX = "Feedback on your previous answer: "
TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
FENCE = re.compile(r"```(?:json|tool_call)?\s*(\{.*?\})\s*```", re.DOTALL)


@dataclass
class AgentResult:
    answer: str
    transcript: list[dict[str, Any]]
    trajectory_ids: list[str] = field(default_factory=list)
    error: str | None = None
    model_calls: int = 0
    seconds: float = 0.0
    agent: dict[str, Any] = field(default_factory=dict)  # what the agent was (OpenClaw: tools…)


def system_prompt(workspace: Path, files: tuple[str, ...] = BOOTSTRAP_FILES) -> str:
    parts = [SYSTEM_HEAD]
    for name in files:
        p = workspace / name
        if p.is_file():
            parts.append(f"## {name}\n{p.read_text(encoding='utf-8', errors='replace').strip()}")
    return "\n\n".join(parts)


def parse_text_tool_calls(text: str, tools: set[str]) -> list[dict[str, Any]]:
    """Tool calls written as text: ``<tool_call>`` tags first, else fenced JSON objects."""
    found = TOOL_CALL_TAG.findall(text) or FENCE.findall(text)
    calls: list[dict[str, Any]] = []
    for i, raw in enumerate(found):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        name = obj.get("name")
        args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                continue
        if name in tools and isinstance(args, dict):
            calls.append({"name": name, "args": args, "id": f"text-call-{i}", "type": "tool_call"})
    return calls


@dataclass
class ModelConfig:
    model: str
    base_url: str
    api_key: str = "not-needed"
    temperature: float = 0.0
    max_tokens: int = 768
    timeout_s: float = 600.0
    max_steps: int = 8


BENCH_AGENTS = "metaclaw.bench_agents"  # entry-point group: name -> (ModelConfig, engine) -> agent


def agent_factory(name: str = "langchain") -> Callable[[ModelConfig, Any], Any]:
    """The agent factory an installed package registers as ``name`` (``metaclaw.bench_agents``)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=BENCH_AGENTS) if ep.name == name]
    if not found:
        raise RuntimeError(
            f"no benchmark agent {name!r} is installed (entry point group {BENCH_AGENTS}); "
            "the default one comes with the LangChain adapter: pip install metaclaw-langchain "
            "langchain-openai"
        )
    factory: Callable[[ModelConfig, Any], Any] = found[0].load()
    return factory
