"""What the proxy's wire formats share: the bad-request error, loose JSON readers, and a
server-sent-events reader that rebuilds events from bytes exactly as they were forwarded."""

from __future__ import annotations

import json
from typing import Any

from metaclaw_core.models import ModelOutput


class RequestError(ValueError):
    """The request body is not what the route's protocol expects (answered with 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def usage_ints(raw: Any) -> dict[str, int]:
    """The integer counters of a usage object (nested details dropped)."""
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


class SseEvents:
    """Reads a server-sent-events stream as it passes and hands each JSON event to
    :meth:`event`. Events split across reads are handled; past ``max_bytes`` it stops
    reading (the stream itself still passes through) and marks the capture truncated."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.seen = 0
        self.done = False
        self.truncated = False
        self.chunks = 0
        self.error: str | None = None
        self._buffer = b""
        self._name: str | None = None
        self._data: list[bytes] = []

    @property
    def at_boundary(self) -> bool:
        """True when the bytes so far end between two events (nothing half sent)."""
        return not self._buffer and not self._data and self._name is None

    def feed(self, data: bytes) -> None:
        self.seen += len(data)
        if self.truncated:
            return
        if self.seen > self.max_bytes:
            self.truncated = True
            self._buffer, self._data, self._name = b"", [], None
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def _line(self, line: bytes) -> None:
        if not line:
            self._dispatch()
        elif line.startswith(b"event:"):
            self._name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            self._data.append(line[5:].strip())

    def _dispatch(self) -> None:
        name, data = self._name, b"\n".join(self._data)
        self._name, self._data = None, []
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            self.chunks += 1
            self.event(name, event)

    def event(self, name: str | None, data: dict[str, Any]) -> None:
        """One parsed event (``name`` from its ``event:`` line, if any)."""

    def output(self) -> ModelOutput:
        return ModelOutput()
