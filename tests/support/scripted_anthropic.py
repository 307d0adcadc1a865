"""A scripted Anthropic Messages server for tests: ``POST /v1/messages`` (any query string,
Claude Code adds ``?beta=true``) answered from a script as JSON or as the real event
sequence (``message_start``, ``ping``, ``content_block_start/delta/stop`` with
``text_delta``, ``thinking_delta``, ``input_json_delta``, ``message_delta``,
``message_stop``), and ``POST /v1/messages/count_tokens``.

    with ScriptedAnthropic() as server:
        server.enqueue(ScriptedReply("Hello!"))
        client = anthropic.Anthropic(base_url=server.url, api_key="test")
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.support.scripted_http import ScriptedReply, ScriptedServer, rough_tokens, words


class ScriptedAnthropic(ScriptedServer):
    routes = ("/v1/messages",)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def other_post(self, path: str, body: Any) -> tuple[int, Any]:
        if path == "/v1/messages/count_tokens":
            return 200, {"input_tokens": rough_tokens(body)}
        return super().other_post(path, body)

    def _tool_id(self, i: int, given: str | None) -> str:
        return given or f"toolu_scripted_{i}"

    def _usage(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, int]:
        if reply.usage is not None:
            return dict(reply.usage)
        out = rough_tokens(reply.text or "") + sum(
            rough_tokens(c.arguments) for c in reply.tool_calls
        )
        return {"input_tokens": rough_tokens(body.get("messages")), "output_tokens": out}

    def _stop(self, reply: ScriptedReply) -> str:
        return "tool_use" if reply.tool_calls else "end_turn"

    def answer(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": "sig"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, c in enumerate(reply.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": self._tool_id(i, c.id),
                    "name": c.name,
                    "input": c.arguments,
                }
            )
        return {
            "id": f"msg_scripted_{self.next_id()}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "scripted-claude",
            "content": content,
            "stop_reason": self._stop(reply),
            "stop_sequence": None,
            "usage": self._usage(reply, body),
        }

    def events(self, reply: ScriptedReply, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        usage = self._usage(reply, body)
        message = {
            "id": f"msg_scripted_{self.next_id()}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "scripted-claude",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
        }
        yield "message_start", {"type": "message_start", "message": message}
        yield "ping", {"type": "ping"}
        index = 0

        def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": start,
                },
            )
            for d in deltas:
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": d},
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}

        if reply.thinking:
            yield from block(
                {"type": "thinking", "thinking": "", "signature": ""},
                [
                    {"type": "thinking_delta", "thinking": reply.thinking},
                    {"type": "signature_delta", "signature": "sig"},
                ],
            )
            index += 1
        if reply.text:
            yield from block(
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": w} for w in words(reply.text)],
            )
            index += 1
        for i, c in enumerate(reply.tool_calls):
            args = json.dumps(c.arguments)
            half = len(args) // 2
            yield from block(
                {"type": "tool_use", "id": self._tool_id(i, c.id), "name": c.name, "input": {}},
                [
                    {"type": "input_json_delta", "partial_json": part}
                    for part in (args[:half], args[half:])
                    if part
                ],
            )
            index += 1
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}
