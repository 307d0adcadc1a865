"""Translation between LangChain messages (LangGraph's state) and metaclaw-core's models.

The same few lines as metaclaw-langchain's (each adapter installs on its own); the role and
tool-call rules themselves are the core's (``normalise_role``, ``tool_call``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from metaclaw_core import Message, ModelOutput, ToolCall, normalise_role, tool_call


def _tool_calls(message: BaseMessage) -> list[ToolCall]:
    calls = getattr(message, "tool_calls", None) or []
    return [tool_call(c.get("id"), c.get("name"), c.get("args", {})) for c in calls]


def to_message(message: BaseMessage) -> Message:
    """One LangChain message as ours (text content only; images and other blocks dropped)."""
    kind = message.type
    if kind == "chat":
        kind = getattr(message, "role", "user")
    return Message(
        role=normalise_role(kind, "user"),
        content=str(message.text),
        name=message.name,
        tool_calls=_tool_calls(message),
        tool_call_id=getattr(message, "tool_call_id", None),
    )


def to_messages(messages: Iterable[BaseMessage]) -> list[Message]:
    return [to_message(m) for m in messages]


def to_output(message: BaseMessage | None) -> ModelOutput:
    """What the model answered, from its ``AIMessage``."""
    if message is None:
        return ModelOutput()
    meta = message.response_metadata or {}
    usage = getattr(message, "usage_metadata", None) or {}
    return ModelOutput(
        text=str(message.text),
        tool_calls=_tool_calls(message),
        finish_reason=meta.get("finish_reason") or meta.get("stop_reason"),
        usage={k: v for k, v in usage.items() if isinstance(v, int)},
    )


def last_ai_message(messages: Sequence[Any]) -> AIMessage | None:
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            return m
    return None
