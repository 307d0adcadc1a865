"""Translation between LangChain messages and metaclaw-core's ``Message`` / ``ModelOutput``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from metaclaw_core import (
    Injection,
    Message,
    ModelOutput,
    ToolCall,
    normalise_role,
    tool_call,
)

# An Injection without text: ``apply_to_system`` then only strips an earlier block.
_NO_SKILLS = Injection(call_id="-", generation=0)


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


def with_skills(system: SystemMessage | None, injection: Injection) -> SystemMessage | None:
    """``system`` with the injected block at its end (an earlier block replaced).

    String content gets the block appended; block-list content (e.g. with provider cache
    markers) keeps its blocks and gets the block as one more text block, so the cached
    prefix stays byte-identical.
    """
    if system is None:
        return SystemMessage(content=injection.text) if injection.text else None
    content = system.content
    new_content: str | list[str | dict[str, Any]]
    if isinstance(content, str):
        new_content = injection.apply_to_system(content)
    else:
        kept: list[str | dict[str, Any]] = []
        for block in content:
            text = block if isinstance(block, str) else block.get("text")
            if isinstance(text, str) and _NO_SKILLS.apply_to_system(text) != text.rstrip():
                stripped = _NO_SKILLS.apply_to_system(text)
                if stripped:
                    kept.append(stripped if isinstance(block, str) else {**block, "text": stripped})
                continue
            kept.append(block)
        if injection.text:
            kept.append({"type": "text", "text": injection.text})
        new_content = kept
    if new_content == content:
        return system
    return system.model_copy(update={"content": new_content})
