"""A scripted OpenAI Responses server for tests: ``POST /v1/responses`` answered from a script
as a ``response`` object or as the events Codex accepts (``response.created``,
``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta``, ``response.output_text.done``, ``response.content_part.done``,
``response.function_call_arguments.delta``, ``response.output_item.done``,
``response.completed`` with ``usage``), each with a ``sequence_number``.

    with ScriptedResponses() as server:
        server.enqueue(ScriptedReply("Hello!"))
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from tests.support.scripted_http import ScriptedReply, ScriptedServer, rough_tokens, words


class ScriptedResponses(ScriptedServer):
    routes = ("/v1/responses",)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {429: "rate_limit_error", 400: "invalid_request_error"}.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def _usage(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, Any]:
        if reply.usage is not None:
            return dict(reply.usage)
        prompt = rough_tokens(body.get("input"))
        out = rough_tokens(reply.text or "") + sum(
            rough_tokens(c.arguments) for c in reply.tool_calls
        )
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + out,
        }

    def _items(self, reply: ScriptedReply, rid: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{rid}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        for i, c in enumerate(reply.tool_calls):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{rid}_{i}",
                    "call_id": c.id or f"call_scripted_{i}",
                    "name": c.name,
                    "arguments": json.dumps(c.arguments),
                    "status": "completed",
                }
            )
        return items

    def _response(
        self, rid: int, body: dict[str, Any], status: str, output: list[Any], usage: Any
    ) -> dict[str, Any]:
        return {
            "id": f"resp_scripted_{rid}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": body.get("model") or "scripted-model",
            "output": output,
            "usage": usage,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": {},
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "temperature": 1.0,
            "top_p": 1.0,
            "previous_response_id": body.get("previous_response_id"),
        }

    def answer(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id()
        return self._response(
            rid, body, "completed", self._items(reply, rid), self._usage(reply, body)
        )

    def events(self, reply: ScriptedReply, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        rid = self.next_id()
        seq = iter(range(10_000))

        def ev(kind: str, **data: Any) -> tuple[str, Any]:
            return kind, {"type": kind, "sequence_number": next(seq), **data}

        yield ev("response.created", response=self._response(rid, body, "in_progress", [], None))
        items = self._items(reply, rid)
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                yield ev(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                where = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield ev("response.content_part.added", **where, part=part)
                for w in words(text):
                    yield ev("response.output_text.delta", **where, delta=w, logprobs=[])
                yield ev("response.output_text.done", **where, text=text, logprobs=[])
                yield ev("response.content_part.done", **where, part={**part, "text": text})
            else:
                yield ev(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
                args = item["arguments"]
                half = len(args) // 2
                for piece in (args[:half], args[half:]):
                    if piece:
                        yield ev(
                            "response.function_call_arguments.delta",
                            item_id=item["id"],
                            output_index=index,
                            delta=piece,
                        )
                yield ev(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=args,
                )
            yield ev("response.output_item.done", output_index=index, item=item)
        yield ev(
            "response.completed",
            response=self._response(rid, body, "completed", items, self._usage(reply, body)),
        )
