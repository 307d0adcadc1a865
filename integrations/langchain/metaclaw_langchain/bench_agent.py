"""The benchmark's default agent: LangChain ``create_agent`` with workspace file tools.

The model is any OpenAI-compatible endpoint (``langchain-openai``'s ``ChatOpenAI``). In
``skills`` and ``full`` modes the MetaClaw middleware injects skills and captures every model
call; in ``baseline`` it is absent. Small local models often write a tool call as text instead
of a structured call; :class:`TextToolCalls` turns those into real tool calls so the agent loop
runs them. ``metaclaw bench run`` finds it through the ``metaclaw.bench_agents`` entry point
(name ``langchain``).

Each round is a fresh conversation: the system prompt (the workspace's bootstrap files), the
previous round's feedback as its own user message, then the question (so the task text the
engine retrieves skills for — and corrections describe — is the question alone).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from metaclaw_core.bench.agent import (
    FEEDBACK_PREFIX,
    AgentResult,
    ModelConfig,
    parse_text_tool_calls,
    system_prompt,
)
from metaclaw_core.bench.workspace import ActionLog, Workspace
from metaclaw_core.wire.openai_format import content_text
from metaclaw_langchain import MetaClawMiddleware


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


def make_agent(config: ModelConfig, engine: Any | None) -> LangChainAgent:
    """The ``metaclaw.bench_agents`` entry point ``langchain``."""
    return LangChainAgent(config, engine)
