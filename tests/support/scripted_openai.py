"""A scripted OpenAI-compatible chat server for tests: real HTTP on 127.0.0.1, no model.

It replays the replies a test queues, in order, as ``/v1/chat/completions`` answers (JSON, or
server-sent events when the request says ``stream: true``), and records every request it got.
Streams are sent chunk by chunk with a pause between chunks, so a client can prove it receives
the first chunk long before the last. Tool calls, usage, finish reasons and error statuses are
all scriptable.

    with ScriptedOpenAI() as server:
        server.enqueue(Reply("Hello!"), Reply(tool_calls=[ToolCallReply("get_time", "{}")]))
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].json["messages"][0]["role"] == "system"

Other uses: ``ScriptedOpenAI(responder=fn)`` answers each request with ``fn(request)`` (a
judge that votes by prompt content); ``default=Reply(...)`` answers once the queue is empty
(otherwise an exhausted script answers 500, so a test that calls too often fails loudly).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "Reply", "ScriptedOpenAI", "ToolCallReply", "error_reply"]


@dataclass
class ToolCallReply:
    """One tool call the scripted model makes."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass
class Reply:
    """One scripted answer.

    Args:
        content: the assistant text (None for a tool-call-only answer).
        tool_calls: tool calls the model makes.
        finish_reason: default ``tool_calls`` when there are tool calls, else ``stop``.
        usage: token counts; default: rough counts from the request and the answer.
        status: HTTP status; >= 400 sends ``error`` as the body (never a stream).
        error: the error body for a failing status (default: OpenAI's error shape).
        chunks: how ``content`` is split into stream deltas (default: one per word).
        chunk_delay_s: pause before each stream chunk after the first (default: the server's).
        delay_s: pause before the response starts (headers included).
        headers: extra response headers.
    """

    content: str | None = "ok"
    tool_calls: list[ToolCallReply] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    chunks: list[str] | None = None
    chunk_delay_s: float | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def error_reply(
    status: int, message: str, *, type: str = "invalid_request_error", code: str | None = None
) -> Reply:
    """A failing answer with OpenAI's error body."""
    return Reply(
        content=None,
        status=status,
        error={"error": {"message": message, "type": type, "param": None, "code": code}},
    )


@dataclass
class RecordedRequest:
    """A request the server received (headers lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _split_words(text: str) -> list[str]:
    parts: list[str] = []
    for i, word in enumerate(text.split(" ")):
        parts.append(word if i == 0 else " " + word)
    return [p for p in parts if p] or [text]


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedOpenAI:
    """Threaded OpenAI-compatible server on 127.0.0.1 (ephemeral port) replaying a script."""

    def __init__(
        self,
        replies: list[Reply] | tuple[Reply, ...] = (),
        *,
        default: Reply | None = None,
        responder: Callable[[RecordedRequest], Reply] | None = None,
        models: tuple[str, ...] = ("scripted-model",),
        chunk_delay_s: float = 0.0,
    ) -> None:
        self._queue: deque[Reply] = deque(replies)
        self.default = default
        self.responder = responder
        self.models = models
        self.chunk_delay_s = chunk_delay_s
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script ----------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def clear(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"scripted server got {len(self.requests)} requests, not {n}"
                    )
                self._cond.wait(left)
            return list(self.requests)

    def _next_reply(self, req: RecordedRequest) -> Reply:
        if self.responder is not None:
            return self.responder(req)
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.default is not None:
            return self.default
        return error_reply(500, "scripted server: no reply left in the script", type="server_error")

    def _record(self, req: RecordedRequest) -> None:
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedOpenAI:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url`` (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- building answers ------------------------------------------------------------------
    def _completion_id(self) -> str:
        return f"chatcmpl-scripted-{next(self._ids)}"

    @staticmethod
    def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
        if reply.usage is not None:
            return dict(reply.usage)
        prompt = sum(_rough_tokens(json.dumps(m)) for m in body.get("messages", []))
        completion = _rough_tokens(reply.content or "") + sum(
            _rough_tokens(c.arguments) for c in reply.tool_calls
        )
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _tool_call_id(call: ToolCallReply, index: int) -> str:
        return call.id or f"call_scripted_{index}"

    @staticmethod
    def _finish(reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._tool_call_id(c, i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(reply.tool_calls)
            ]
        return {
            "id": self._completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.models[0],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self._finish(reply),
                    "logprobs": None,
                }
            ],
            "usage": self._usage(reply, body),
        }

    def stream_chunks(self, reply: Reply, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cid, created = self._completion_id(), int(time.time())
        model = body.get("model") or self.models[0]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        if reply.content:
            for piece in reply.chunks or _split_words(reply.content):
                yield chunk({"content": piece})
        for i, call in enumerate(reply.tool_calls):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": self._tool_call_id(call, i),
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            args = call.arguments
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                if part:
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
        yield chunk({}, self._finish(reply))
        options = body.get("stream_options") or {}
        if options.get("include_usage"):
            yield {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": self._usage(reply, body),
            }

    # -- HTTP ------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each stream chunk leaves at once

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _read(self) -> RecordedRequest:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    received_at=time.monotonic(),
                )
                scripted._record(req)
                return req

            def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)
                self.wfile.flush()

            def do_GET(self) -> None:
                self._read()
                if self.path.rstrip("/").endswith("/models"):
                    data = [
                        {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                        for m in scripted.models
                    ]
                    self._send_json(200, {"object": "list", "data": data})
                else:
                    self._send_json(
                        404,
                        {
                            "error": {
                                "message": f"no route {self.path}",
                                "type": "invalid_request_error",
                            }
                        },
                    )

            def do_POST(self) -> None:
                req = self._read()
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send_json(
                        404,
                        {
                            "error": {
                                "message": f"no route {self.path}",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                    return
                try:
                    body = req.json or {}
                except ValueError:
                    self._send_json(
                        400,
                        {"error": {"message": "body is not JSON", "type": "invalid_request_error"}},
                    )
                    return
                reply = scripted._next_reply(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status >= 400:
                    err = reply.error or {
                        "error": {"message": "scripted error", "type": "server_error"}
                    }
                    self._send_json(reply.status, err, reply.headers)
                    return
                if not body.get("stream"):
                    self._send_json(reply.status, scripted.completion(reply, body), reply.headers)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                delay = (
                    scripted.chunk_delay_s if reply.chunk_delay_s is None else reply.chunk_delay_s
                )
                try:
                    for i, data in enumerate(scripted.stream_chunks(reply, body)):
                        if i and delay:
                            time.sleep(delay)
                        self._write_chunk(f"data: {json.dumps(data)}\n\n".encode())
                    if delay:
                        time.sleep(delay)
                    self._write_chunk(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _write_chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        return Handler
