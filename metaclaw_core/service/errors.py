"""Error bodies of the service: one JSON shape for every 4xx/5xx, OpenAI's.

``{"error": {"message": ..., "type": ..., "code": ...}}`` is what OpenAI clients already parse,
so the proxy and the engine API answer failures alike; ``message`` says what to do.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from metaclaw_core.errors import (
    MetaClawError,
    SkillFormatError,
    SkillNotFoundError,
    StoreError,
)
from metaclaw_core.skills.library import SkillQuarantinedError, SkillRejectedError

MAX_LISTED_PROBLEMS = 5


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "code": code, **extra}}


def error_response(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse(
        error_body(message, type=type, code=code, **extra), status_code=status, headers=headers
    )


# Routes whose clients speak Anthropic's protocol: their errors take Anthropic's shape.
ANTHROPIC_PATH_PREFIX = "/v1/messages"


def error_bytes(
    message: str, *, type: str, code: str | None = None, path: str | None = None
) -> bytes:
    """The same body for pure ASGI middleware (no Response object there); for a ``path``
    of the Anthropic routes, Anthropic's ``{"type": "error", "error": {...}}``."""
    if path is not None and path.startswith(ANTHROPIC_PATH_PREFIX):
        kind = code if code == "request_too_large" else type
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps(error_body(message, type=type, code=code)).encode()


def _where(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def describe_validation(errors: list[Any]) -> str:
    """One readable line for pydantic errors: ``reward: Input should be ≤ 1; task: ...``."""
    problems = [f"{_where(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors]
    more = len(problems) - MAX_LISTED_PROBLEMS
    text = "; ".join(problems[:MAX_LISTED_PROBLEMS])
    return text + (f" (and {more} more)" if more > 0 else "")


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "the request body is not valid JSON", code="invalid_json")
    details = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors
    ]
    return error_response(
        422,
        "invalid request: " + describe_validation(errors),
        code="invalid_request",
        details=details,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(
        exc.status_code
    )
    if request.url.path.startswith(ANTHROPIC_PATH_PREFIX):
        return JSONResponse(
            json.loads(error_bytes(str(exc.detail), type=kind, code=code, path=request.url.path)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )
    return error_response(
        exc.status_code,
        str(exc.detail),
        type=kind,
        code=code,
        headers=getattr(exc, "headers", None),
    )


def status_for(exc: MetaClawError) -> tuple[int, str]:
    """HTTP status and error type for an engine error."""
    if isinstance(exc, SkillNotFoundError):
        return 404, "not_found"
    if isinstance(exc, SkillQuarantinedError):
        return 422, "skill_quarantined"
    if isinstance(exc, SkillRejectedError):
        return 422, "skill_rejected"
    if isinstance(exc, SkillFormatError):
        return 409, "conflict"
    if isinstance(exc, StoreError):
        return 503, "store_error"
    return 400, "invalid_request_error"


async def _engine_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MetaClawError)
    status, kind = status_for(exc)
    return error_response(status, str(exc), type=kind)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(MetaClawError, _engine_error)
