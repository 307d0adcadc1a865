"""OpenAI chat-completions JSON ↔ the core's models, for the proxy.

Requests are kept as the client's own dicts (unknown fields pass through untouched); this
module only reads them into :class:`Message` for retrieval and capture, puts the skills block
into the system message, and reads answers (whole or streamed) into :class:`ModelOutput`.
"""

from __future__ import annotations

import json
from typing import Any

from metaclaw_core.models import Injection, Message, ModelOutput, Role, ToolCall, strip_injection
from metaclaw_core.wire.common import RequestError

ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


class ChatRequestError(RequestError):
    """The request body is not a chat-completions request (answered with 400)."""


def validate_chat_request(body: Any) -> dict[str, Any]:
    """Check the shape the proxy relies on; everything else is the upstream's to judge."""
    if not isinstance(body, dict):
        raise ChatRequestError("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatRequestError("'messages' must be a non-empty array", "messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ChatRequestError(f"messages[{i}] must be an object", f"messages[{i}]")
        if not isinstance(m.get("role"), str):
            raise ChatRequestError(f"messages[{i}].role must be a string", f"messages[{i}].role")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise ChatRequestError(
                f"messages[{i}].content must be a string, an array of parts or null",
                f"messages[{i}].content",
            )
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ChatRequestError("'model' must be a string", "model")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise ChatRequestError("'stream' must be true or false", "stream")
    return body


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_text(content: Any) -> str:
    """The text of a message's content (a string, or the text parts of an array)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return str(content)


def _tool_calls(raw: Any) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if not isinstance(raw, list):
        return calls
    for c in raw:
        if not isinstance(c, dict):
            continue
        fn = _obj(c.get("function"))
        args = fn.get("arguments", "")
        calls.append(
            ToolCall.model_construct(
                id=c.get("id") if isinstance(c.get("id"), str) else None,
                name=str(fn.get("name") or ""),
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
        )
    return calls


def to_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """The messages as core models (roles mapped: developer → system, function → tool)."""
    out: list[Message] = []
    for m in raw:
        role = ROLES.get(m.get("role", ""))
        if role is None:
            continue
        name = m.get("name")
        tool_call_id = m.get("tool_call_id")
        out.append(
            Message.model_construct(
                role=role,
                content=content_text(m.get("content")),
                name=name if isinstance(name, str) else None,
                tool_calls=_tool_calls(m.get("tool_calls")),
                tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
            )
        )
    return out


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Recorded messages as OpenAI chat messages (the inverse of :func:`to_messages`), without
    any earlier skills block."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "system" if m.role == "system" else m.role
        content = strip_injection(m.content).rstrip() if role == "system" else m.content
        d: dict[str, Any] = {"role": role, "content": content}
        if m.tool_calls:
            d["tool_calls"] = [
                {
                    "id": c.id or f"call_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(m.tool_calls)
            ]
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        if m.name and role in ("user", "assistant"):
            d["name"] = m.name
        out.append(d)
    return out


def apply_injection_to_body(body: dict[str, Any], injection: Injection) -> dict[str, Any]:
    """A copy of ``body`` whose messages carry the block (see :func:`apply_injection`)."""
    return {**body, "messages": apply_injection(body["messages"], injection)}


def messages_of(body: dict[str, Any]) -> list[Message]:
    return to_messages(body["messages"])


def apply_injection(messages: list[dict[str, Any]], injection: Injection) -> list[dict[str, Any]]:
    """A copy of ``messages`` with the block at the end of the first system message.

    A request without a system (or developer) message gets one in front. The host's message
    dicts are not changed.
    """
    if not injection.text:
        return messages
    out = list(messages)
    for i, m in enumerate(out):
        if m.get("role") not in ("system", "developer"):
            continue
        content = m.get("content")
        if isinstance(content, list):
            parts: list[Any] = []
            for p in content:
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    text = strip_injection(p["text"]).rstrip()
                    if text:
                        parts.append({**p, "text": text})
                else:
                    parts.append(p)
            new_content: Any = [*parts, {"type": "text", "text": injection.text}]
        else:
            new_content = injection.apply_to_system(content if isinstance(content, str) else "")
        out[i] = {**m, "content": new_content}
        return out
    return [{"role": "system", "content": injection.text}, *out]


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def output_from_completion(data: Any) -> ModelOutput:
    """A non-streamed answer as a :class:`ModelOutput` (first choice)."""
    if not isinstance(data, dict):
        return ModelOutput()
    choices = data.get("choices") or []
    first = _obj(choices[0] if choices else None)
    message = _obj(first.get("message"))
    return ModelOutput.model_construct(
        text=content_text(message.get("content")),
        tool_calls=_tool_calls(message.get("tool_calls")),
        finish_reason=first.get("finish_reason"),
        usage=_usage(data.get("usage")),
    )


class StreamAccumulator:
    """Reads server-sent chat-completion chunks as they pass and rebuilds the answer.

    Bytes are fed exactly as they were forwarded; events split across reads are handled.
    Past ``max_bytes`` it stops reading (the stream still passes through) and marks the
    output as truncated.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.seen = 0
        self.done = False
        self.truncated = False
        self.chunks = 0
        self._buffer = b""
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, int] = {}
        self.error: str | None = None

    def feed(self, data: bytes) -> None:
        if self.truncated:
            return
        self.seen += len(data)
        if self.seen > self.max_bytes:
            self.truncated = True
            self._buffer = b""
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.chunks += 1
        if isinstance(event.get("error"), dict):
            self.error = str(event["error"].get("message") or event["error"])
        if event.get("usage"):
            self._usage = _usage(event["usage"])
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                slot = self._calls.setdefault(
                    int(call.get("index", 0)), {"id": None, "name": "", "arguments": ""}
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = _obj(call.get("function"))
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["arguments"] += fn["arguments"]

    def output(self) -> ModelOutput:
        calls = [
            ToolCall.model_construct(id=c["id"], name=c["name"], arguments=c["arguments"])
            for _, c in sorted(self._calls.items())
        ]
        return ModelOutput.model_construct(
            text="".join(self._text),
            tool_calls=calls,
            finish_reason=self._finish,
            usage=self._usage,
        )
