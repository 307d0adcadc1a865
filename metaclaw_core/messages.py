"""Normalising what hosts call roles and tool calls into the core's :class:`Message` fields.

Every adapter (LangChain, LangGraph, LlamaIndex) and wire format reads a host's own message
objects; the role names and the shapes of tool-call arguments they meet are the same few, so
they are mapped here once.
"""

from __future__ import annotations

import json
from typing import Any

from metaclaw_core.models import Message, Role, ToolCall

# A host's role name -> ours (LangChain's message types, OpenAI's and LlamaIndex's roles).
ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def normalise_role(name: object, default: Role = "user") -> Role:
    """Our role for a host's role name (an enum's ``value`` is read too); ``default`` if the
    name is unknown."""
    value = getattr(name, "value", name)
    return ROLES.get(str(value).lower(), default) if value is not None else default


def tool_arguments(args: Any) -> str:
    """Tool-call arguments as the JSON text we store: a string passes as it is, anything else
    is serialised (non-ASCII kept, unknown objects by ``str``)."""
    if isinstance(args, str):
        return args
    return json.dumps({} if args is None else args, ensure_ascii=False, default=str)


def tool_call(id: Any, name: Any, args: Any) -> ToolCall:
    """A :class:`ToolCall` from a host's loose fields (None name -> "", any args -> JSON)."""
    return ToolCall(
        id=None if id is None else str(id),
        name=str(name or ""),
        arguments=tool_arguments(args),
    )


def message_key(m: Message) -> tuple[Any, ...]:
    """Identity of a message inside one run (to merge what successive model calls saw)."""
    return (m.role, m.content, m.tool_call_id, tuple((c.id, c.name) for c in m.tool_calls))
