"""The OpenAI-compatible proxy: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Each call: read the client's JSON, choose skills (``await engine.abefore_call``), append the
block to the system message, forward to ``proxy.upstream_base_url`` with httpx, and answer
with the upstream's own bytes and status. A stream is passed on chunk by chunk as it arrives
(read as it passes, for the capture); errors keep the upstream's status and body. The call is
captured after the last byte has gone to the client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response, StreamingResponse

from metaclaw_core.models import CallContext, Injection, ModelOutput
from metaclaw_core.service.errors import error_response
from metaclaw_core.service.openai_format import (
    ChatRequestError,
    StreamAccumulator,
    apply_injection,
    output_from_completion,
    to_messages,
    validate_chat_request,
)
from metaclaw_core.service.state import ServiceState, service_state

log = logging.getLogger("metaclaw.proxy")
router = APIRouter(prefix="/v1", tags=["OpenAI-compatible proxy"])
State = Annotated[ServiceState, Depends(service_state)]

SESSION_HEADER = "x-metaclaw-session"
MAX_SESSION_CHARS = 256
# Bodies larger than this are parsed and serialised on a worker thread (an 8 MB JSON body
# would hold the event loop for tens of milliseconds).
OFF_LOOP_JSON_BYTES = 256 * 1024
FRAMEWORK = "openai-proxy"
# Upstream response headers worth passing on (hop-by-hop and length headers never are).
PASS_HEADERS = ("x-request-id", "openai-processing-ms", "openai-version", "retry-after")
_CHAT_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["messages"],
                    "properties": {
                        "model": {"type": "string"},
                        "messages": {"type": "array", "items": {"type": "object"}},
                        "stream": {"type": "boolean"},
                        "user": {"type": "string", "description": "Session id if no header."},
                    },
                    "additionalProperties": True,
                }
            }
        },
    }
}


def _dump(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()


def redact_url(url: str | None) -> str | None:
    """``url`` without user:password (safe to show in status and errors)."""
    if not url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def make_upstream_client(state: ServiceState) -> httpx.AsyncClient:
    p = state.settings.proxy
    return httpx.AsyncClient(
        timeout=httpx.Timeout(p.read_timeout_s, connect=p.connect_timeout_s),
        limits=httpx.Limits(
            max_connections=p.max_connections, max_keepalive_connections=p.max_connections
        ),
        follow_redirects=False,
        transport=state.upstream_transport,
    )


def _upstream_url(state: ServiceState, path: str, request: Request) -> str | None:
    base = state.upstream_base_url or state.settings.proxy.upstream_base_url
    if not base:
        return None
    url = base.rstrip("/") + path
    query = request.url.query
    return f"{url}?{query}" if query else url


def _no_upstream() -> Response:
    return error_response(
        503,
        "metaclaw proxy: no upstream configured; set METACLAW_PROXY__UPSTREAM_BASE_URL "
        "(e.g. https://api.openai.com/v1) or start with `metaclaw serve --upstream URL`",
        type="server_error",
        code="no_upstream",
    )


def _upstream_headers(state: ServiceState, request: Request) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    key = state.settings.proxy.api_key()
    if key:
        headers["authorization"] = f"Bearer {key}"
    elif state.settings.service.token is None and "authorization" in request.headers:
        # No key of our own and no service token: the client's credentials are for upstream.
        headers["authorization"] = request.headers["authorization"]
    for name in ("openai-organization", "openai-project"):
        if name in request.headers:
            headers[name] = request.headers[name]
    return headers


def _response_headers(
    upstream: httpx.Response, injection: Injection | None, call_id: str
) -> dict[str, str]:
    headers = {k: upstream.headers[k] for k in PASS_HEADERS if k in upstream.headers}
    headers["x-metaclaw-call-id"] = call_id
    if injection is not None:
        headers["x-metaclaw-generation"] = str(injection.generation)
        headers["x-metaclaw-skills"] = ",".join(injection.skill_names)
    return headers


def _transport_error(state: ServiceState, exc: httpx.HTTPError) -> tuple[str, Response]:
    kind = type(exc).__name__
    state.metrics.upstream_errors.inc(kind)
    where = redact_url(state.settings.proxy.upstream_base_url)
    message = f"metaclaw proxy: upstream {where} failed: {kind}: {exc}".rstrip(": ")
    status = 504 if isinstance(exc, httpx.TimeoutException) else 502
    return message, error_response(
        status, message, type="upstream_error", code="upstream_unreachable"
    )


@router.post("/chat/completions", openapi_extra=_CHAT_SCHEMA, response_model=None)
async def chat_completions(request: Request, state: State) -> Response:
    """Forward a chat completion upstream with the skills injected; capture the call."""
    started = time.perf_counter()
    raw_body = await request.body()
    try:
        if len(raw_body) > OFF_LOOP_JSON_BYTES:
            parsed = await asyncio.to_thread(json.loads, raw_body)
        else:
            parsed = json.loads(raw_body)
        body = validate_chat_request(parsed)
    except ValueError as exc:
        if isinstance(exc, ChatRequestError):
            return error_response(400, str(exc), code="invalid_request", param=exc.param)
        return error_response(400, "the request body is not valid JSON", code="invalid_json")
    url = _upstream_url(state, "/chat/completions", request)
    if url is None:
        return _no_upstream()
    proxy = state.settings.proxy
    stream = bool(body.get("stream"))
    session = request.headers.get(SESSION_HEADER) or body.get("user")
    ctx = CallContext(
        messages=to_messages(body["messages"]),
        session_id=session[:MAX_SESSION_CHARS] if isinstance(session, str) else None,
        framework=FRAMEWORK,
        model=body.get("model"),
        metadata={"stream": stream},
    )
    injection: Injection | None = None
    if proxy.inject:
        injection = await state.inject(ctx)
    if injection is not None and injection.text:
        body["messages"] = apply_injection(body["messages"], injection)
        ctx.messages = to_messages(body["messages"])
        if len(raw_body) > OFF_LOOP_JSON_BYTES:
            payload = await asyncio.to_thread(_dump, body)
        else:
            payload = _dump(body)
    else:
        payload = raw_body  # untouched bytes: nothing to add
    client = state.http
    assert client is not None, "the upstream client is opened by the app's lifespan"
    upstream_request = client.build_request(
        "POST", url, content=payload, headers=_upstream_headers(state, request)
    )
    state.metrics.proxy_added_seconds.observe(time.perf_counter() - started)

    async def capture(output: ModelOutput | None, error: str | None, **meta: Any) -> None:
        if not proxy.capture:
            return
        ctx.metadata.update(meta)
        latency = (time.perf_counter() - started) * 1000.0
        await state.capture(ctx, output, injection=injection, error=error, latency_ms=latency)

    try:
        upstream = await client.send(upstream_request, stream=True)
    except httpx.HTTPError as exc:
        message, response = _transport_error(state, exc)
        state.spawn(capture(None, message))
        return response
    first_byte = time.perf_counter() - started
    state.metrics.proxy_ttfb_seconds.observe(first_byte, str(stream).lower())
    state.metrics.upstream_responses.inc(str(upstream.status_code), str(stream).lower())
    headers = _response_headers(upstream, injection, ctx.call_id)
    media_type = upstream.headers.get("content-type", "application/json")
    meta = {"status": upstream.status_code, "first_byte_ms": round(first_byte * 1000.0, 3)}

    if upstream.status_code >= 400 or not media_type.startswith("text/event-stream"):
        try:
            raw = await upstream.aread()
        except httpx.HTTPError as exc:
            message, response = _transport_error(state, exc)
            state.spawn(capture(None, message, **meta))
            return response
        finally:
            await upstream.aclose()
        if upstream.status_code >= 400:
            said = raw[:500].decode("utf-8", "replace")
            error: str | None = f"upstream status {upstream.status_code}: {said}"
            output = None
        else:
            error = None
            try:
                output = output_from_completion(json.loads(raw))
            except ValueError:
                output = ModelOutput(text=raw.decode("utf-8", "replace"))
        state.spawn(capture(output, error, **meta))
        return Response(
            raw, status_code=upstream.status_code, media_type=media_type, headers=headers
        )

    acc = StreamAccumulator(proxy.max_capture_bytes)

    async def pass_through() -> AsyncIterator[bytes]:
        error: str | None = None
        try:
            async for chunk in upstream.aiter_bytes():
                acc.feed(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            kind = type(exc).__name__
            state.metrics.upstream_errors.inc(kind)
            error = f"upstream stream broke: {kind}: {exc}"
        except BaseException:  # the client went away (cancellation) or the server is stopping
            error = "client disconnected before the stream ended"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
            if error is None and acc.error:
                error = f"upstream error event: {acc.error}"
            # Captured after the stream: the client's last byte does not wait for it.
            state.spawn(
                capture(
                    acc.output(),
                    error,
                    **meta,
                    stream_chunks=acc.chunks,
                    stream_done=acc.done,
                    **({"capture_truncated": True} if acc.truncated else {}),
                )
            )

    return StreamingResponse(
        pass_through(),
        status_code=upstream.status_code,
        media_type=media_type,
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


@router.get("/models", response_model=None)
async def models(request: Request, state: State) -> Response:
    """The upstream's model list, as it answered."""
    url = _upstream_url(state, "/models", request)
    if url is None:
        return _no_upstream()
    assert state.http is not None
    headers = _upstream_headers(state, request)
    headers.pop("content-type")
    try:
        upstream = await state.http.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return _transport_error(state, exc)[1]
    return Response(
        upstream.content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
    )
