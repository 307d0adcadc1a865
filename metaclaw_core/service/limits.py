"""Request size limits: a body larger than ``service.max_request_bytes`` gets 413.

Checked on ``Content-Length`` before anything is read, and again while a chunked body
streams in, so an oversized request never reaches a route or fills memory.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metaclaw_core.service.errors import error_bytes


def _message(max_bytes: int) -> str:
    return (
        f"request body larger than {max_bytes} bytes (service.max_request_bytes; "
        "set METACLAW_SERVICE__MAX_REQUEST_BYTES to raise it)"
    )


class RequestTooLarge(HTTPException):
    """Raised while reading a body that outgrew the limit (routes' handlers render it)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, _message(max_bytes))


class BodySizeLimit:
    """ASGI middleware enforcing a maximum request body size."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, scope: Scope, send: Send) -> None:
        body = error_bytes(
            _message(self.max_bytes),
            type="invalid_request_error",
            code="request_too_large",
            path=scope.get("path"),
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._reject(scope, send)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise RequestTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except RequestTooLarge:
            if not started:
                await self._reject(scope, send)
