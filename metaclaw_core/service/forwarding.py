"""The proxy's one pipeline, shared by every protocol it speaks (chat completions, Responses,
Anthropic Messages): parse, inject, forward, pass the answer through, capture.

Each call: read the client's JSON, choose skills (``await engine.abefore_call``), add the block
where the protocol keeps its system prompt, forward with httpx, and answer with the upstream's
own bytes and status. A stream is passed on chunk by chunk as it arrives (read as it passes,
for the capture); errors keep the upstream's status and body. The call is captured after the
last byte has gone to the client. A :class:`WireFormat` says what differs per protocol.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from metaclaw_core.models import CallContext, Injection, Message, ModelOutput
from metaclaw_core.service.agent_scope import request_agent
from metaclaw_core.service.state import ServiceState
from metaclaw_core.wire.common import RequestError

log = logging.getLogger("metaclaw.proxy")

SESSION_HEADER = "x-metaclaw-session"
MAX_SESSION_CHARS = 256
# Bodies larger than this are parsed and serialised on a worker thread (an 8 MB JSON body
# would hold the event loop for tens of milliseconds).
OFF_LOOP_JSON_BYTES = 256 * 1024
# Upstream response headers worth passing on (hop-by-hop and length headers never are).
PASS_HEADERS = (
    "x-request-id",
    "request-id",
    "openai-processing-ms",
    "openai-version",
    "anthropic-organization-id",
    "retry-after",
)


class StreamReader(Protocol):
    """What reads a stream as it passes (see :class:`metaclaw_core.service.wire.SseEvents`)."""

    done: bool
    truncated: bool
    chunks: int
    error: str | None

    def feed(self, data: bytes) -> None: ...

    def output(self) -> ModelOutput: ...


# (status, message, code, param) -> the protocol's own error response
ErrorResponder = Callable[[int, str, str, str | None], Response]


@dataclass(frozen=True)
class WireFormat:
    """What one protocol of the proxy needs: how to read, change and answer its JSON."""

    framework: str  # the trajectories' framework label
    upstream_path: str  # appended to the base URL
    validate: Callable[[Any], dict[str, Any]]  # raises RequestError
    to_messages: Callable[[dict[str, Any]], list[Message]]
    apply_injection: Callable[[dict[str, Any], Injection], dict[str, Any]]
    output_from_body: Callable[[Any], ModelOutput]
    stream_reader: Callable[[int], StreamReader]
    error: ErrorResponder
    session: Callable[[Request, dict[str, Any]], Any]
    base_url: Callable[[ServiceState], str | None]
    upstream_headers: Callable[[ServiceState, Request], dict[str, str]]
    no_upstream: str  # what to set when no upstream is configured
    # The event sent to the client when the upstream stream breaks (None: just end it).
    stream_error: Callable[[str], bytes] | None = None


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


def upstream_url(base: str | None, path: str, request: Request) -> str | None:
    if not base:
        return None
    url = base.rstrip("/") + path
    query = request.url.query
    return f"{url}?{query}" if query else url


def session_of(request: Request, fallback: Any) -> str | None:
    """The session: the ``X-MetaClaw-Session`` header, else the protocol's own field."""
    session = request.headers.get(SESSION_HEADER) or fallback
    return session[:MAX_SESSION_CHARS] if isinstance(session, str) and session else None


def response_headers(
    upstream: httpx.Response, injection: Injection | None, call_id: str
) -> dict[str, str]:
    headers = {k: upstream.headers[k] for k in PASS_HEADERS if k in upstream.headers}
    headers["x-metaclaw-call-id"] = call_id
    if injection is not None:
        headers["x-metaclaw-generation"] = str(injection.generation)
        headers["x-metaclaw-skills"] = ",".join(injection.skill_names)
    return headers


def transport_error(
    state: ServiceState, fmt: WireFormat, exc: httpx.HTTPError
) -> tuple[str, Response]:
    kind = type(exc).__name__
    state.metrics.upstream_errors.inc(kind)
    where = redact_url(fmt.base_url(state))
    message = f"metaclaw proxy: upstream {where} failed: {kind}: {exc}".rstrip(": ")
    timeout = isinstance(exc, httpx.TimeoutException)
    code = "upstream_timeout" if timeout else "upstream_unreachable"
    return message, fmt.error(504 if timeout else 502, message, code, None)


async def pass_through(
    fmt: WireFormat,
    state: ServiceState,
    method: str,
    path: str,
    request: Request,
    headers: dict[str, str],
    content: bytes | None = None,
) -> Response:
    """A call that needs no skills and no capture (``/v1/models``, ``count_tokens``): sent
    upstream as the client sent it, answered as the upstream answered, errors in ``fmt``'s
    shape."""
    url = upstream_url(fmt.base_url(state), path, request)
    if url is None:
        return fmt.error(503, fmt.no_upstream, "no_upstream", None)
    assert state.http is not None
    try:
        upstream = await state.http.request(method, url, headers=headers, content=content)
    except httpx.HTTPError as exc:
        return transport_error(state, fmt, exc)[1]
    return Response(
        upstream.content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type", "application/json"),
    )


async def _parse(raw: bytes) -> Any:
    if len(raw) > OFF_LOOP_JSON_BYTES:
        return await asyncio.to_thread(json.loads, raw)
    return json.loads(raw)


async def forward(fmt: WireFormat, request: Request, state: ServiceState) -> Response:
    """Forward one call upstream with the skills injected; capture it (see the module doc)."""
    started = time.perf_counter()
    raw_body = await request.body()
    try:
        body = fmt.validate(await _parse(raw_body))
    except RequestError as exc:
        return fmt.error(400, str(exc), "invalid_request", exc.param)
    except (ValueError, RecursionError):
        return fmt.error(400, "the request body is not valid JSON", "invalid_json", None)
    url = upstream_url(fmt.base_url(state), fmt.upstream_path, request)
    if url is None:
        return fmt.error(503, fmt.no_upstream, "no_upstream", None)
    proxy = state.settings.proxy
    stream = bool(body.get("stream"))
    ctx = CallContext(
        session_id=session_of(request, fmt.session(request, body)),
        framework=fmt.framework,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        metadata={"stream": stream, "path": request.url.path},
        agent=request_agent(request),
    )
    injection: Injection | None = None
    payload = raw_body  # untouched bytes unless a block is added
    try:
        ctx.messages = fmt.to_messages(body)
        if proxy.inject:
            injection = await state.inject(ctx)
        if injection is not None and injection.text:
            body = fmt.apply_injection(body, injection)
            ctx.messages = fmt.to_messages(body)  # as the model will see them
            if len(raw_body) > OFF_LOOP_JSON_BYTES:
                payload = await asyncio.to_thread(_dump, body)
            else:
                payload = _dump(body)
    except Exception as exc:  # fail open: the call goes upstream as the client sent it
        state.engine.faults.record(f"{fmt.framework} injection", exc)
        payload = raw_body
        # Recorded as what happened: nothing injected (the query is kept for the capture).
        injection = Injection(
            call_id=ctx.call_id,
            generation=injection.generation if injection else state.engine.generation,
            query=injection.query if injection else "",
            query_vector=injection.query_vector if injection else None,
            degraded=f"{type(exc).__name__}: {exc}",
        )
    client = state.http
    assert client is not None, "the upstream client is opened by the app's lifespan"
    upstream_request = client.build_request(
        "POST", url, content=payload, headers=fmt.upstream_headers(state, request)
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
        message, response = transport_error(state, fmt, exc)
        state.spawn(capture(None, message))
        return response
    first_byte = time.perf_counter() - started
    state.metrics.proxy_ttfb_seconds.observe(first_byte, str(stream).lower())
    state.metrics.upstream_responses.inc(str(upstream.status_code), str(stream).lower())
    headers = response_headers(upstream, injection, ctx.call_id)
    media_type = upstream.headers.get("content-type", "application/json")
    meta = {"status": upstream.status_code, "first_byte_ms": round(first_byte * 1000.0, 3)}

    if upstream.status_code >= 400 or not media_type.startswith("text/event-stream"):
        try:
            raw = await upstream.aread()
        except httpx.HTTPError as exc:
            message, response = transport_error(state, fmt, exc)
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
                output = fmt.output_from_body(json.loads(raw))
            except ValueError:
                output = ModelOutput(text=raw.decode("utf-8", "replace"))
        state.spawn(capture(output, error, **meta))
        return Response(
            raw, status_code=upstream.status_code, media_type=media_type, headers=headers
        )

    reader = fmt.stream_reader(proxy.max_capture_bytes)

    async def pass_through() -> AsyncIterator[bytes]:
        error: str | None = None
        try:
            try:
                async for chunk in upstream.aiter_bytes():
                    reader.feed(chunk)
                    yield chunk
                if fmt.stream_error is not None and not reader.done and not reader.truncated:
                    error = "upstream stream ended before its last event"
            except httpx.HTTPError as exc:
                kind = type(exc).__name__
                state.metrics.upstream_errors.inc(kind)
                error = f"upstream stream broke: {kind}: {exc}"
            if error is not None and fmt.stream_error is not None:
                # Tell the client in its protocol's words (after whatever half event it got).
                tail = b"" if getattr(reader, "at_boundary", True) else b"\n\n"
                yield tail + fmt.stream_error(f"metaclaw proxy: {error}")
        except BaseException:  # the client went away (cancellation) or the server is stopping
            error = error or "client disconnected before the stream ended"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
            if error is None and reader.error:
                error = f"upstream error event: {reader.error}"
            # Captured after the stream: the client's last byte does not wait for it.
            state.spawn(
                capture(
                    reader.output(),
                    error,
                    **meta,
                    stream_chunks=reader.chunks,
                    stream_done=reader.done,
                    **({"capture_truncated": True} if reader.truncated else {}),
                )
            )

    return StreamingResponse(
        pass_through(),
        status_code=upstream.status_code,
        media_type=media_type,
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )
