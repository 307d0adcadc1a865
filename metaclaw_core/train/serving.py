"""An OpenAI-compatible ASGI app over a :class:`PolicyServer` (the RL-trained policy).

``metaclaw serve`` uses it as the proxy's upstream when the slow loop is on (in process,
through ``httpx.ASGITransport``): the proxy injects skills and captures the call as for any
upstream, and the answer comes from the newest published weights. Generation runs on a worker
thread, so the event loop keeps serving while a sampler works.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from metaclaw_core.models import new_id
from metaclaw_core.train.backend import SamplingParams
from metaclaw_core.train.policy import PolicyCompletion, PolicyNotReadyError, PolicyServer
from metaclaw_core.train.tokenize import ChatMessage
from metaclaw_core.wire.openai_format import content_text

POLICY_BASE_URL = "http://metaclaw-policy/v1"
VERSION_HEADER = "x-metaclaw-policy-version"
LABEL_HEADER = "x-metaclaw-policy-weights"


def _error(status: int, message: str, code: str) -> JSONResponse:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": code}}, status_code=status
    )


def chat_request_messages(body: dict[str, Any]) -> list[ChatMessage]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    out: list[ChatMessage] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError("each message needs a 'role'")
        role = m["role"]
        role = "system" if role == "developer" else role
        text = content_text(m.get("content"))
        if role == "tool":
            role, text = "user", f"<tool_result>{text}</tool_result>"
        out.append({"role": role, "content": text})
    return out


def sampling_params(body: dict[str, Any], *, max_tokens_cap: int) -> SamplingParams:
    asked = body.get("max_completion_tokens") or body.get("max_tokens") or max_tokens_cap
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    return SamplingParams(
        max_tokens=max(1, min(int(asked), max_tokens_cap)),
        temperature=1.0 if temperature is None else max(float(temperature), 1e-4),
        top_p=1.0 if top_p is None else float(top_p),
        stop=tuple(str(s) for s in stop),
        seed=body.get("seed"),
    )


def completion_body(result: PolicyCompletion, model: str, cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "finish_reason": reason,
            }
            for i, (text, reason) in enumerate(
                zip(result.texts, result.finish_reasons, strict=True)
            )
        ],
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        },
        "system_fingerprint": f"{result.label}@v{result.version}",
    }


async def _sse(result: PolicyCompletion, model: str, cid: str) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None, index: int) -> bytes:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
            "system_fingerprint": f"{result.label}@v{result.version}",
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    for i, (text, reason) in enumerate(zip(result.texts, result.finish_reasons, strict=True)):
        yield chunk({"role": "assistant", "content": ""}, None, i)
        if text:
            yield chunk({"content": text}, None, i)
        yield chunk({}, reason, i)
    yield b"data: [DONE]\n\n"


def policy_app(policy: PolicyServer, *, max_tokens_cap: int = 512) -> Starlette:
    """The app: ``POST /v1/chat/completions`` and ``GET /v1/models``."""

    async def chat(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            messages = chat_request_messages(body)
            params = sampling_params(body, max_tokens_cap=max_tokens_cap)
            n = int(body.get("n") or 1)
        except (ValueError, TypeError) as exc:
            return _error(400, f"metaclaw policy: {exc}", "invalid_request")
        try:
            result = await anyio.to_thread.run_sync(lambda: policy.complete(messages, params, n=n))
        except PolicyNotReadyError as exc:
            return _error(503, str(exc), "policy_not_ready")
        cid = f"chatcmpl-{new_id()}"
        headers = {VERSION_HEADER: str(result.version), LABEL_HEADER: result.label}
        if body.get("stream"):
            return StreamingResponse(
                _sse(result, policy.model_name, cid),
                media_type="text/event-stream",
                headers=headers,
            )
        return JSONResponse(completion_body(result, policy.model_name, cid), headers=headers)

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": policy.model_name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "metaclaw",
                    }
                ],
            }
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )
