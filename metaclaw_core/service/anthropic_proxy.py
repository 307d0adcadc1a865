"""The Anthropic-compatible proxy: ``POST /v1/messages`` (Claude Code sends ``?beta=true``,
passed on) and ``POST /v1/messages/count_tokens``, forwarded to ``proxy.anthropic_base_url``.

Messages go through the same pipeline as chat completions
(:func:`metaclaw_core.service.forwarding.forward`): skills at the end of ``system``, the
stream passed through event by event, the call captured. Errors are in Anthropic's shape.
``count_tokens`` is passed through as the client sent it (no skills: it answers a question
about the client's own prompt).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from metaclaw_core.service import anthropic_format
from metaclaw_core.service.forwarding import WireFormat, forward, pass_through
from metaclaw_core.service.state import ServiceState, service_state

router = APIRouter(prefix="/v1", tags=["Anthropic-compatible proxy"])
State = Annotated[ServiceState, Depends(service_state)]

# Headers of the client's that mean something to an Anthropic upstream.
FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta")
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "invalid_json": "invalid_request_error",
    "no_upstream": "api_error",
    "upstream_unreachable": "api_error",
    "upstream_timeout": "timeout_error",
    "request_too_large": "request_too_large",
}
_SCHEMA: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["messages"],
                    "properties": {
                        "model": {"type": "string"},
                        "system": {
                            "oneOf": [
                                {"type": "string"},
                                {"type": "array", "items": {"type": "object"}},
                            ]
                        },
                        "messages": {"type": "array", "items": {"type": "object"}},
                        "stream": {"type": "boolean"},
                        "metadata": {
                            "type": "object",
                            "description": "metadata.user_id is the session id if no header.",
                        },
                    },
                    "additionalProperties": True,
                }
            }
        },
    }
}


def anthropic_error(status: int, message: str, code: str, param: str | None) -> Response:
    """``{"type": "error", "error": {"type", "message"}}`` with ``status``."""
    kind = _ERROR_TYPES.get(code, "api_error")
    return JSONResponse(anthropic_format.error_body(message, kind), status_code=status)


def anthropic_base(state: ServiceState) -> str | None:
    """The base URL without a trailing ``/v1`` (the routes add ``/v1/messages``)."""
    base = state.settings.proxy.anthropic_base_url
    if not base:
        return None
    base = base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def anthropic_headers(state: ServiceState, request: Request) -> dict[str, str]:
    """What goes upstream: the key from settings (``x-api-key``), else the client's own
    ``x-api-key`` and (when the service has no token of its own) ``Authorization``."""
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    for name in FORWARDED_HEADERS:
        if name in request.headers:
            headers[name] = request.headers[name]
    key = state.settings.proxy.anthropic_key()
    if key:
        headers["x-api-key"] = key
        return headers
    if "x-api-key" in request.headers:
        headers["x-api-key"] = request.headers["x-api-key"]
    if state.settings.service.token is None and "authorization" in request.headers:
        headers["authorization"] = request.headers["authorization"]
    return headers


def _session(request: Request, body: dict[str, Any]) -> Any:
    metadata = body.get("metadata")
    return metadata.get("user_id") if isinstance(metadata, dict) else None


MESSAGES = WireFormat(
    framework="anthropic-proxy",
    upstream_path="/v1/messages",
    validate=anthropic_format.validate_messages_request,
    to_messages=anthropic_format.to_messages,
    apply_injection=anthropic_format.apply_injection,
    output_from_body=anthropic_format.output_from_message,
    stream_reader=anthropic_format.MessageStreamAccumulator,
    error=anthropic_error,
    session=_session,
    base_url=anthropic_base,
    upstream_headers=anthropic_headers,
    no_upstream=(
        "metaclaw proxy: no Anthropic upstream configured; set "
        "METACLAW_PROXY__ANTHROPIC_BASE_URL (e.g. https://api.anthropic.com)"
    ),
    stream_error=anthropic_format.stream_error_event,
)


@router.post("/messages", openapi_extra=_SCHEMA, response_model=None)
async def messages(request: Request, state: State) -> Response:
    """Forward an Anthropic Messages call upstream with the skills injected; capture it."""
    return await forward(MESSAGES, request, state)


@router.post("/messages/count_tokens", response_model=None)
async def count_tokens(request: Request, state: State) -> Response:
    """Passed through to the upstream's ``count_tokens`` as the client sent it."""
    return await pass_through(
        MESSAGES,
        state,
        "POST",
        "/v1/messages/count_tokens",
        request,
        anthropic_headers(state, request),
        await request.body(),
    )
