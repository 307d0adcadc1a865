"""The OpenAI-compatible proxy: ``POST /v1/chat/completions``, ``POST /v1/responses`` (the
Responses API; Codex) and ``GET /v1/models``, forwarded to ``proxy.upstream_base_url``.

The pipeline is :func:`metaclaw_core.service.forwarding.forward`; this module says what is
OpenAI about it: where the block goes (:mod:`.openai_format`, :mod:`.responses_format`),
the error shape, the credentials sent upstream. The Anthropic routes are in
:mod:`.anthropic_proxy`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from metaclaw_core.service import responses_format
from metaclaw_core.service.agent_scope import POLICY_AGENT_HEADER, request_agent
from metaclaw_core.service.errors import error_response
from metaclaw_core.service.forwarding import (
    MAX_SESSION_CHARS,
    OFF_LOOP_JSON_BYTES,
    SESSION_HEADER,
    WireFormat,
    forward,
    make_upstream_client,
    pass_through,
    redact_url,
)
from metaclaw_core.service.state import ServiceState, service_state
from metaclaw_core.wire import openai_format

__all__ = [
    "CHAT",
    "MAX_SESSION_CHARS",
    "OFF_LOOP_JSON_BYTES",
    "RESPONSES",
    "SESSION_HEADER",
    "make_upstream_client",
    "redact_url",
    "router",
]

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible proxy"])
State = Annotated[ServiceState, Depends(service_state)]
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "invalid_json": "invalid_request_error",
    "no_upstream": "server_error",
    "upstream_unreachable": "upstream_error",
    "upstream_timeout": "upstream_error",
}


def _schema(required: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": [required],
                        "properties": properties,
                        "additionalProperties": True,
                    }
                }
            },
        }
    }


_CHAT_SCHEMA = _schema(
    "messages",
    {
        "model": {"type": "string"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "stream": {"type": "boolean"},
        "user": {"type": "string", "description": "Session id if no header."},
    },
)
_RESPONSES_SCHEMA = _schema(
    "input",
    {
        "model": {"type": "string"},
        "instructions": {"type": "string"},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        "stream": {"type": "boolean"},
        "previous_response_id": {"type": "string"},
        "prompt_cache_key": {"type": "string", "description": "Session id if no header."},
    },
)


def _openai_error(status: int, message: str, code: str, param: str | None) -> Response:
    kind = _ERROR_TYPES.get(code, "server_error")
    if code == "invalid_request":
        return error_response(status, message, type=kind, code=code, param=param)
    return error_response(status, message, type=kind, code=code)


def _openai_base(state: ServiceState) -> str | None:
    return state.upstream_base_url or state.settings.proxy.upstream_base_url


def _openai_headers(state: ServiceState, request: Request) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    key = state.settings.proxy.api_key()
    if key:
        headers["authorization"] = f"Bearer {key}"
    elif state.settings.service.token is None and "authorization" in request.headers:
        # No key of our own and no service token: the client's credentials are for upstream.
        headers["authorization"] = request.headers["authorization"]
    for name in ("openai-organization", "openai-project", "openai-beta"):
        if name in request.headers:
            headers[name] = request.headers[name]
    if state.upstream_transport is not None:  # the slow loop's policies, in this process
        headers[POLICY_AGENT_HEADER.decode()] = request_agent(request)
    return headers


_NO_UPSTREAM = (
    "metaclaw proxy: no upstream configured; set METACLAW_PROXY__UPSTREAM_BASE_URL "
    "(e.g. https://api.openai.com/v1) or start with `metaclaw serve --upstream URL`"
)

CHAT = WireFormat(
    framework="openai-proxy",
    upstream_path="/chat/completions",
    validate=openai_format.validate_chat_request,
    to_messages=openai_format.messages_of,
    apply_injection=openai_format.apply_injection_to_body,
    output_from_body=openai_format.output_from_completion,
    stream_reader=openai_format.StreamAccumulator,
    error=_openai_error,
    session=lambda request, body: body.get("user"),
    base_url=_openai_base,
    upstream_headers=_openai_headers,
    no_upstream=_NO_UPSTREAM,
)

RESPONSES = WireFormat(
    framework="responses-proxy",
    upstream_path="/responses",
    validate=responses_format.validate_responses_request,
    to_messages=responses_format.to_messages,
    apply_injection=responses_format.apply_injection,
    output_from_body=responses_format.output_from_response,
    stream_reader=responses_format.ResponseStreamAccumulator,
    error=_openai_error,
    # Codex names its conversation in prompt_cache_key (and sends no `user`).
    session=lambda request, body: body.get("prompt_cache_key") or body.get("user"),
    base_url=_openai_base,
    upstream_headers=_openai_headers,
    no_upstream=_NO_UPSTREAM,
    stream_error=responses_format.stream_error_event,
)


@router.post("/chat/completions", openapi_extra=_CHAT_SCHEMA, response_model=None)
async def chat_completions(request: Request, state: State) -> Response:
    """Forward a chat completion upstream with the skills injected; capture the call."""
    return await forward(CHAT, request, state)


@router.post("/responses", openapi_extra=_RESPONSES_SCHEMA, response_model=None)
async def responses(request: Request, state: State) -> Response:
    """Forward a Responses call upstream with the skills injected; capture the call."""
    return await forward(RESPONSES, request, state)


@router.get("/models", response_model=None)
async def models(request: Request, state: State) -> Response:
    """The upstream's model list, as it answered."""
    headers = _openai_headers(state, request)
    headers.pop("content-type")
    return await pass_through(CHAT, state, "GET", "/models", request, headers)
