"""Anthropic Messages JSON ↔ the core's models, for the ``/v1/messages`` proxy route.

Requests stay the client's own dicts: unknown fields, block types and roles (Claude Code
sends a ``role: "system"`` message inside ``messages``) pass through untouched. This module
reads them into :class:`Message` for retrieval and capture, adds the skills block at the end
of ``system`` without touching a block that carries ``cache_control``, and reads answers
(whole or streamed as ``message_start`` … ``message_stop`` events) into :class:`ModelOutput`.
"""

from __future__ import annotations

import json
from typing import Any

from metaclaw_core.models import (
    BLOCK_START,
    Injection,
    Message,
    ModelOutput,
    Role,
    ToolCall,
    strip_injection,
)
from metaclaw_core.wire.common import RequestError, SseEvents, obj, usage_ints

ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


def validate_messages_request(body: Any) -> dict[str, Any]:
    """Check the shape the proxy relies on; everything else is the upstream's to judge."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: must be a non-empty array", "messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RequestError(f"messages.{i}: must be an object", f"messages.{i}")
        if not isinstance(m.get("role"), str):
            raise RequestError(f"messages.{i}.role: must be a string", f"messages.{i}.role")
        content = m.get("content")
        if not isinstance(content, str | list):
            raise RequestError(
                f"messages.{i}.content: must be a string or an array of content blocks",
                f"messages.{i}.content",
            )
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise RequestError("system: must be a string or an array of text blocks", "system")
    if isinstance(system, list) and not all(isinstance(b, dict) for b in system):
        raise RequestError("system: every block must be an object", "system")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("model: must be a string", "model")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestError("stream: must be true or false", "stream")
    return body


def _block_text(content: Any) -> str:
    """The text of a string or of the ``text`` blocks of an array (other blocks skipped)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b["text"]
        for b in content
        if isinstance(b, dict)
        and b.get("type", "text") == "text"
        and isinstance(b.get("text"), str)
    )


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def to_messages(body: dict[str, Any]) -> list[Message]:
    """``system`` then ``messages`` as core models.

    A ``tool_use`` block becomes a tool call of its assistant message; a ``tool_result`` block
    becomes a ``tool`` message (so a user turn holding only results is not read as the user's
    words). Thinking, images and unknown blocks are skipped here (they still go upstream).
    """
    out: list[Message] = []
    system = _block_text(body.get("system"))
    if system:
        out.append(Message.model_construct(role="system", content=system, tool_calls=[]))
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = ROLES.get(m.get("role", ""))
        if role is None:
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(Message.model_construct(role=role, content=content, tool_calls=[]))
            continue
        texts: list[str] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif kind in ("tool_use", "server_tool_use"):
                calls.append(
                    ToolCall.model_construct(
                        id=b.get("id") if isinstance(b.get("id"), str) else None,
                        name=str(b.get("name") or ""),
                        arguments=_arguments(b.get("input", {})),
                    )
                )
            elif kind == "tool_result":
                said = _block_text(b.get("content"))
                if b.get("is_error") is True:
                    said = f"[error] {said}"
                tid = b.get("tool_use_id")
                results.append(
                    Message.model_construct(
                        role="tool",
                        content=said,
                        tool_calls=[],
                        tool_call_id=tid if isinstance(tid, str) else None,
                    )
                )
        out.extend(results)  # results answer the previous assistant turn: they come first
        if texts or calls:
            out.append(
                Message.model_construct(role=role, content="\n".join(texts), tool_calls=calls)
            )
    return out


def _is_our_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"].lstrip().startswith(BLOCK_START)
        and not strip_injection(block["text"]).strip()
        and "cache_control" not in block
    )


def apply_injection(body: dict[str, Any], injection: Injection) -> dict[str, Any]:
    """A copy of ``body`` whose ``system`` ends with the skills block (an earlier one removed).

    A string ``system`` gets the block appended. An array gets the block as a new trailing
    text block: a block carrying ``cache_control`` is never edited, so the prefix the client
    cached (tools, then ``system`` up to its breakpoint) is byte for byte what it was. An
    earlier turn's block is dropped from a block without ``cache_control``.
    """
    if not injection.text:
        return body
    system = body.get("system")
    new_system: Any
    if isinstance(system, list):
        kept: list[Any] = []
        for b in system:
            if _is_our_block(b):
                continue
            if (
                isinstance(b, dict)
                and "cache_control" not in b
                and isinstance(b.get("text"), str)
                and BLOCK_START in b["text"]
            ):
                b = {**b, "text": strip_injection(b["text"]).rstrip()}
            kept.append(b)
        new_system = [*kept, {"type": "text", "text": injection.text}]
    else:
        new_system = injection.apply_to_system(system if isinstance(system, str) else "")
    return {**body, "system": new_system}


def output_from_message(data: Any) -> ModelOutput:
    """A non-streamed ``message`` answer as a :class:`ModelOutput`."""
    data = obj(data)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for b in data.get("content") or []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif b.get("type") in ("tool_use", "server_tool_use"):
            calls.append(
                ToolCall.model_construct(
                    id=b.get("id") if isinstance(b.get("id"), str) else None,
                    name=str(b.get("name") or ""),
                    arguments=_arguments(b.get("input", {})),
                )
            )
    stop = data.get("stop_reason")
    return ModelOutput.model_construct(
        text="".join(texts),
        tool_calls=calls,
        finish_reason=stop if isinstance(stop, str) else None,
        usage=usage_ints(data.get("usage")),
    )


class MessageStreamAccumulator(SseEvents):
    """Rebuilds a streamed answer from ``message_start`` … ``message_stop`` as it passes."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stop: str | None = None
        self._usage: dict[str, int] = {}

    def event(self, name: str | None, data: dict[str, Any]) -> None:
        kind = data.get("type", name)
        if kind == "message_start":
            self._usage.update(usage_ints(obj(data.get("message")).get("usage")))
        elif kind == "content_block_start":
            block = obj(data.get("content_block"))
            self._blocks[int(data.get("index", 0))] = {
                "type": block.get("type"),
                "id": block.get("id"),
                "name": block.get("name"),
                "text": block.get("text") if isinstance(block.get("text"), str) else "",
                "json": "",
                "input": block.get("input"),
            }
        elif kind == "content_block_delta":
            slot = self._blocks.setdefault(
                int(data.get("index", 0)), {"type": "text", "text": "", "json": ""}
            )
            delta = obj(data.get("delta"))
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                slot["text"] += delta["text"]
            elif delta.get("type") == "input_json_delta" and isinstance(
                delta.get("partial_json"), str
            ):
                slot["json"] += delta["partial_json"]
        elif kind == "message_delta":
            stop = obj(data.get("delta")).get("stop_reason")
            if isinstance(stop, str):
                self._stop = stop
            self._usage.update(usage_ints(data.get("usage")))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            err = obj(data.get("error"))
            self.error = str(err.get("message") or err or "error event")

    def output(self) -> ModelOutput:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _, b in sorted(self._blocks.items()):
            if b.get("type") == "text":
                texts.append(b.get("text") or "")
            elif b.get("type") in ("tool_use", "server_tool_use"):
                args = b.get("json") or ""
                if not args and b.get("input"):
                    args = _arguments(b["input"])
                calls.append(
                    ToolCall.model_construct(
                        id=b.get("id"), name=str(b.get("name") or ""), arguments=args or "{}"
                    )
                )
        return ModelOutput.model_construct(
            text="".join(texts), tool_calls=calls, finish_reason=self._stop, usage=self._usage
        )


def error_body(message: str, type: str = "invalid_request_error") -> dict[str, Any]:
    """Anthropic's error shape: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": type, "message": message}}


def stream_error_event(message: str, type: str = "api_error") -> bytes:
    """The ``error`` event Anthropic sends when a stream fails after it started."""
    data = json.dumps(error_body(message, type), ensure_ascii=False)
    return f"event: error\ndata: {data}\n\n".encode()
