"""The default benchmark agent: LangChain ``create_agent`` with workspace file tools.

The model is any OpenAI-compatible endpoint (``langchain-openai``'s ``ChatOpenAI``). In
``skills`` and ``full`` modes the MetaClaw middleware injects skills and captures every model
call; in ``baseline`` it is absent. Small local models often write a tool call as text
(``<tool_call>{…}</tool_call>`` or a fenced JSON object) instead of a structured call;
:class:`TextToolCalls` turns those into real tool calls so the agent loop runs them.

Each round is a fresh conversation: the system prompt (the workspace's bootstrap files), the
previous round's feedback as its own user message, then the question (so the task text the
engine retrieves skills for — and corrections describe — is the question alone).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaclaw_core.bench.workspace import ActionLog, Workspace
from metaclaw_core.wire.openai_format import content_text

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


def _text_tool_calls_middleware(tool_names: set[str]) -> Any:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
    from langchain_core.messages import AIMessage

    def convert(response: Any) -> Any:
        if not isinstance(response, ModelResponse) or not response.result:
            return response
        msg = response.result[-1]
        if not isinstance(msg, AIMessage) or msg.tool_calls or not isinstance(msg.content, str):
            return response
        calls = parse_text_tool_calls(msg.content, tool_names)
        if not calls:
            return response
        fixed = AIMessage(content=msg.content, tool_calls=calls, id=msg.id)
        return ModelResponse(
            result=[*response.result[:-1], fixed],
            structured_response=response.structured_response,
        )

    class TextToolCalls(AgentMiddleware[Any, Any, Any]):
        """Turn tool calls a model wrote as text into structured tool calls."""

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return convert(handler(request))

        async def awrap_model_call(
            self, request: Any, handler: Callable[[Any], Awaitable[Any]]
        ) -> Any:
            return convert(await handler(request))

    return TextToolCalls()


def make_tools(ws: Workspace) -> list[Any]:
    from langchain_core.tools import StructuredTool

    return [
        StructuredTool.from_function(
            ws.list_files,
            name="list_files",
            description="List the files under a folder of the workspace (default: all).",
        ),
        StructuredTool.from_function(
            ws.read_file, name="read_file", description="Read a text file of the workspace."
        ),
        StructuredTool.from_function(
            ws.write_file,
            name="write_file",
            description="Create or overwrite a file of the workspace with the given content.",
        ),
    ]


@dataclass
class ModelConfig:
    model: str
    base_url: str
    api_key: str = "not-needed"
    temperature: float = 0.0
    max_tokens: int = 768
    timeout_s: float = 600.0
    max_steps: int = 8


class LangChainAgent:
    """One round at a time through ``create_agent`` (+ the MetaClaw middleware when given)."""

    def __init__(self, config: ModelConfig, engine: Any | None = None) -> None:
        from langchain_openai import ChatOpenAI

        self.config = config
        self.engine = engine
        self.model = ChatOpenAI(
            model=config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout_s,
            max_retries=1,
        )

    def run(
        self,
        prompt: str,
        workspace: Path,
        log: ActionLog,
        session_id: str,
        feedback: str | None = None,
    ) -> AgentResult:
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
        from langgraph.errors import GraphRecursionError

        ws = Workspace(workspace, log)
        tools = make_tools(ws)
        captured: list[str] = []
        middleware: list[Any] = []
        if self.engine is not None:
            from metaclaw_langchain import MetaClawMiddleware

            middleware.append(
                MetaClawMiddleware(
                    self.engine,
                    session_id=session_id,
                    on_capture=lambda tid, _ctx: captured.append(tid),
                )
            )
        middleware.append(_text_tool_calls_middleware({t.name for t in tools}))
        agent: Any = create_agent(
            self.model,
            tools=tools,
            system_prompt=system_prompt(workspace),
            middleware=middleware,
        )
        started = time.monotonic()
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        if feedback:
            messages.insert(0, HumanMessage(f"{FEEDBACK_PREFIX}{feedback}"))
        error: str | None = None
        try:
            for state in agent.stream(
                {"messages": messages},
                config={"recursion_limit": 2 * self.config.max_steps + 1},
                stream_mode="values",
            ):
                messages = list(state["messages"])  # the latest state, kept if a step fails
        except GraphRecursionError:
            error = f"agent stopped after {self.config.max_steps} steps"
        except Exception as exc:  # the model server, a tool, the framework: the round goes on
            error = f"{type(exc).__name__}: {exc}"[:500]
        answers = [m for m in messages if isinstance(m, AIMessage)]
        answer = content_text(answers[-1].content) if answers else ""
        return AgentResult(
            answer=answer,
            transcript=[_message_json(m) for m in messages],
            trajectory_ids=captured,
            error=error,
            model_calls=len(answers),
            seconds=round(time.monotonic() - started, 3),
        )


def _message_json(m: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.type, "content": content_text(m.content)}
    calls = getattr(m, "tool_calls", None)
    if calls:
        out["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in calls]
    if m.type == "tool":
        out["tool"] = getattr(m, "name", None)
    return out
