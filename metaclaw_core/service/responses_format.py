"""OpenAI Responses JSON ↔ the core's models, for the ``/v1/responses`` proxy route.

Requests stay the client's own dicts: unknown fields, item types and tool types (Codex sends
``namespace``, ``custom`` and ``web_search`` tools) pass through untouched. The skills block
goes at the end of ``instructions``, or, when a client sends none and its prompt is a
leading ``developer`` (or ``system``) input item (Codex), at the end of that item; a request
with neither gets ``instructions``.

With ``previous_response_id`` the upstream keeps the earlier turns: this side only ever sees
(and captures) the items the request carries and the answer it got.
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

ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}
TEXT_PARTS = ("input_text", "output_text", "text")
CALL_ITEMS = ("function_call", "custom_tool_call")
CALL_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")
FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def validate_responses_request(body: Any) -> dict[str, Any]:
    """Check the shape the proxy relies on; everything else is the upstream's to judge."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    items = body.get("input")
    if items is not None and not isinstance(items, str | list):
        raise RequestError("'input' must be a string or an array of items", "input")
    if isinstance(items, list):
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise RequestError(f"input[{i}] must be an object", f"input[{i}]")
    if body.get("instructions") is not None and not isinstance(body["instructions"], str):
        raise RequestError("'instructions' must be a string", "instructions")
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise RequestError("'model' must be a string", "model")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestError("'stream' must be true or false", "stream")
    return body


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") in TEXT_PARTS and isinstance(p.get("text"), str)
    )


def _call(item: dict[str, Any]) -> ToolCall:
    args = item.get("arguments", item.get("input", ""))
    cid = item.get("call_id") or item.get("id")
    return ToolCall.model_construct(
        id=cid if isinstance(cid, str) else None,
        name=str(item.get("name") or ""),
        arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
    )


def to_messages(body: dict[str, Any]) -> list[Message]:
    """``instructions`` then ``input`` as core models (developer → system; a function call
    is a tool call of an assistant message, its output a ``tool`` message)."""
    out: list[Message] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append(Message.model_construct(role="system", content=instructions, tool_calls=[]))
    items = body.get("input")
    if isinstance(items, str):
        out.append(Message.model_construct(role="user", content=items, tool_calls=[]))
        return out
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = ROLES.get(item.get("role", ""))
            if role is not None:
                out.append(
                    Message.model_construct(
                        role=role, content=_text(item.get("content")), tool_calls=[]
                    )
                )
        elif kind in CALL_ITEMS:
            last = out[-1] if out else None
            if (
                last is not None
                and last.role == "assistant"
                and (last.tool_calls or not last.content)
            ):
                last.tool_calls.append(_call(item))
            else:
                out.append(
                    Message.model_construct(role="assistant", content="", tool_calls=[_call(item)])
                )
        elif kind in CALL_OUTPUT_ITEMS:
            cid = item.get("call_id")
            output = item.get("output")
            out.append(
                Message.model_construct(
                    role="tool",
                    content=output if isinstance(output, str) else _text(output),
                    tool_calls=[],
                    tool_call_id=cid if isinstance(cid, str) else None,
                )
            )
    return out


def _with_block(content: Any, injection: Injection) -> Any:
    """``content`` (a string or parts) ending with the block, an earlier block removed."""
    if isinstance(content, list):
        parts: list[Any] = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str) and BLOCK_START in p["text"]:
                text = strip_injection(p["text"]).rstrip()
                if text:
                    parts.append({**p, "text": text})
            else:
                parts.append(p)
        return [*parts, {"type": "input_text", "text": injection.text}]
    return injection.apply_to_system(content if isinstance(content, str) else "")


def apply_injection(body: dict[str, Any], injection: Injection) -> dict[str, Any]:
    """A copy of ``body`` with the skills block at the end of its system prompt."""
    if not injection.text:
        return body
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions.strip():
        return {**body, "instructions": injection.apply_to_system(instructions)}
    items = body.get("input")
    if isinstance(items, list) and items:
        first = items[0]
        if first.get("type", "message") == "message" and first.get("role") in (
            "developer",
            "system",
        ):
            new_first = {**first, "content": _with_block(first.get("content"), injection)}
            return {**body, "input": [new_first, *items[1:]]}
    return {**body, "instructions": injection.text}


def output_from_response(data: Any) -> ModelOutput:
    """A ``response`` object (whole, or the one ``response.completed`` carries)."""
    data = obj(data)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts.append(_text(item.get("content")))
        elif item.get("type") in CALL_ITEMS:
            calls.append(_call(item))
    status = data.get("status")
    reason = obj(data.get("incomplete_details")).get("reason")
    if not isinstance(reason, str):
        reason = status if isinstance(status, str) else None
    return ModelOutput.model_construct(
        text="".join(texts),
        tool_calls=calls,
        finish_reason=reason,
        usage=usage_ints(data.get("usage")),
    )


class ResponseStreamAccumulator(SseEvents):
    """Rebuilds a streamed answer (``response.created`` … ``response.completed``) as it
    passes: from the final response when it came, else from the items and deltas seen."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._final: dict[str, Any] | None = None
        self._deltas: dict[int, list[str]] = {}
        self._items: dict[int, dict[str, Any]] = {}

    def event(self, name: str | None, data: dict[str, Any]) -> None:
        kind = data.get("type", name)
        if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
            self._deltas.setdefault(int(data.get("output_index", 0)), []).append(data["delta"])
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            self._items[int(data.get("output_index", len(self._items)))] = data["item"]
        elif kind in FINAL_EVENTS:
            self._final = obj(data.get("response"))
            self.done = True
            if kind == "response.failed":
                err = obj(self._final.get("error"))
                self.error = str(err.get("message") or err or "response failed")
        elif kind == "error":
            self.error = str(data.get("message") or obj(data.get("error")).get("message") or data)

    def output(self) -> ModelOutput:
        if self._final is not None and self._final.get("output"):
            return output_from_response(self._final)
        items = dict(self._items)
        for index, pieces in self._deltas.items():
            if index not in items:
                items[index] = {
                    "type": "message",
                    "content": [{"type": "output_text", "text": "".join(pieces)}],
                }
        partial = {**(self._final or {}), "output": [v for _, v in sorted(items.items())]}
        return output_from_response(partial)


def stream_error_event(message: str, code: str = "upstream_error") -> bytes:
    """The Responses stream's ``error`` event, for a stream that failed after it started."""
    data = {"type": "error", "code": code, "message": message, "param": None}
    return f"event: error\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
