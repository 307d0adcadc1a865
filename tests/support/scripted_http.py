"""What the scripted protocol servers share (Anthropic Messages, OpenAI Responses): real HTTP
on 127.0.0.1, a queue of scripted answers, every request recorded, an optional check of the
bytes each request carried, and server-sent events written one by one with pauses (or cut
off mid-stream, the connection dropped without the stream's end).

``expect=fn`` runs ``fn(request)`` on every request before it is answered; an assertion it
raises is kept in ``failures`` and answered with 500, so a test sees both. ``responder=fn``
answers each request with ``fn(request)`` instead of the queue (for real clients, whose side
calls would otherwise take a scripted answer out of turn).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "ScriptedCall", "ScriptedReply", "ScriptedServer"]

HOLD_LIMIT_S = 15.0


@dataclass
class ScriptedCall:
    """One tool call the scripted model makes (``arguments`` as a dict: the tool's input)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class ScriptedReply:
    """One scripted answer.

    Args:
        text: the assistant text (None for a tool-call-only answer).
        tool_calls: tool calls the model makes.
        thinking: a thinking block before the text (Anthropic only).
        status: HTTP status; >= 400 sends ``error`` as the body (never a stream).
        error: the error body for a failing status (default: the protocol's shape).
        chunk_delay_s: pause before each stream event after the first.
        delay_s: pause before the response starts.
        drop_after_events: close the connection after this many stream events.
        hold_after_events: after this many stream events, wait for ``release`` (at most
            ``HOLD_LIMIT_S``) before sending the rest: a client that sees those events
            before it sets ``release`` proves they were not held back on the way.
        usage: token counts (default: rough counts).
    """

    text: str | None = "ok"
    tool_calls: list[ScriptedCall] = field(default_factory=list)
    thinking: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    chunk_delay_s: float = 0.0
    delay_s: float = 0.0
    drop_after_events: int | None = None
    hold_after_events: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    usage: dict[str, int] | None = None
    held_too_long: bool = False


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


def words(text: str) -> list[str]:
    parts = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
    return [p for p in parts if p] or [text]


def rough_tokens(data: Any) -> int:
    return max(1, len(json.dumps(data)) // 4)


class ScriptedServer:
    """Threaded HTTP server replaying a script; subclasses say what a reply looks like."""

    #: paths (without the query string) this server answers with the script
    routes: tuple[str, ...] = ()

    def __init__(
        self,
        replies: list[ScriptedReply] | tuple[ScriptedReply, ...] = (),
        *,
        default: ScriptedReply | None = None,
        expect: Callable[[RecordedRequest], None] | None = None,
        responder: Callable[[RecordedRequest], ScriptedReply] | None = None,
    ) -> None:
        self.responder = responder
        self._queue: deque[ScriptedReply] = deque(replies)
        self.default = default
        self.expect = expect
        self.requests: list[RecordedRequest] = []
        self.failures: list[str] = []
        self.dropped = 0
        self.client_gone = 0  # streams whose client left before the last event
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None

    # -- script ----------------------------------------------------------------------------
    def enqueue(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.failures.clear()
            self.expect = None

    def posts(self) -> list[RecordedRequest]:
        """The requests to the scripted routes, oldest first."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?")[0] in self.routes]

    def next_id(self) -> int:
        return next(self._ids)

    def _next_reply(self, req: RecordedRequest) -> ScriptedReply | None:
        if self.responder is not None:
            return self.responder(req)
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.default

    # -- what subclasses provide -----------------------------------------------------------
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def answer(self, reply: ScriptedReply, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, reply: ScriptedReply, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
        raise NotImplementedError

    def other_post(self, path: str, body: Any) -> tuple[int, Any]:
        return 404, self.error_body(404, f"no route {path}")

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        server.daemon_threads = True
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- HTTP ------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each event leaves at once

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
                with scripted._lock:
                    scripted.requests.append(req)
                return req

            def _send_json(self, status: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("request-id", f"req_scripted_{scripted.next_id()}")
                self.end_headers()
                self.wfile.write(raw)
                self.wfile.flush()

            def do_HEAD(self) -> None:  # Claude Code preconnects with HEAD /
                self._read()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._read()
                self._send_json(404, scripted.error_body(404, f"no route {self.path}"))

            def do_POST(self) -> None:
                req = self._read()
                path = self.path.split("?")[0]
                try:
                    body = req.json
                except ValueError:
                    self._send_json(400, scripted.error_body(400, "body is not JSON"))
                    return
                if path not in scripted.routes:
                    self._send_json(*scripted.other_post(path, body))
                    return
                if scripted.expect is not None:
                    try:
                        scripted.expect(req)
                    except AssertionError as exc:
                        with scripted._lock:
                            scripted.failures.append(str(exc) or "assertion failed")
                        self._send_json(500, scripted.error_body(500, f"expect failed: {exc}"))
                        return
                reply = scripted._next_reply(req)
                if reply is None:
                    self._send_json(500, scripted.error_body(500, "no reply left in the script"))
                    return
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status >= 400:
                    err = reply.error or scripted.error_body(reply.status, "scripted error")
                    self._send_json(reply.status, err)
                    return
                if not body.get("stream"):
                    self._send_json(200, scripted.answer(reply, body))
                    return
                self._stream(reply, body)

            def _stream(self, reply: ScriptedReply, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i, (name, data) in enumerate(scripted.events(reply, body)):
                        if reply.drop_after_events is not None and i >= reply.drop_after_events:
                            scripted.dropped += 1
                            self.close_connection = True
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        if i and i == reply.hold_after_events:
                            reply.held_too_long = not reply.release.wait(HOLD_LIMIT_S)
                        if i and reply.chunk_delay_s:
                            time.sleep(reply.chunk_delay_s)
                        raw = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                        self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    scripted.client_gone += 1
                    self.close_connection = True

        return Handler
