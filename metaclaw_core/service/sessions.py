"""What the service remembers between requests, in memory and bounded.

The trajectory each call id became (so feedback can name a call, not only a trajectory) and,
per session, the captures seen (so a session end can say what happened and ``/metaclaw good``
can rate the latest turn). Lost on restart by design: the store keeps the durable record.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_IDS_PER_SESSION = 200


@dataclass
class SessionRecord:
    captured: int = 0
    failures: int = 0
    trajectory_ids: list[str] = field(default_factory=list)
    ended: bool = False


class SessionLedger:
    """Bounded maps call id → trajectory id and session id → :class:`SessionRecord`."""

    def __init__(self, max_calls: int = 10_000, max_sessions: int = 10_000) -> None:
        self._calls: OrderedDict[str, str] = OrderedDict()
        self._sessions: OrderedDict[str, SessionRecord] = OrderedDict()
        self._max_calls = max_calls
        self._max_sessions = max_sessions
        self._lock = threading.Lock()

    def record(
        self, call_id: str, session_id: str | None, trajectory_id: str, *, failed: bool
    ) -> None:
        with self._lock:
            self._calls[call_id] = trajectory_id
            if len(self._calls) > self._max_calls:
                self._calls.popitem(last=False)
            if session_id is None:
                return
            rec = self._sessions.pop(session_id, None) or SessionRecord()
            self._sessions[session_id] = rec  # most recently used last
            rec.captured += 1
            rec.failures += int(failed)
            rec.trajectory_ids.append(trajectory_id)
            del rec.trajectory_ids[:-MAX_IDS_PER_SESSION]
            if len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)

    def trajectory_for_call(self, call_id: str) -> str | None:
        with self._lock:
            return self._calls.get(call_id)

    def last_trajectory(self, session_id: str) -> str | None:
        with self._lock:
            rec = self._sessions.get(session_id)
            return rec.trajectory_ids[-1] if rec and rec.trajectory_ids else None

    def end(self, session_id: str) -> SessionRecord:
        """Mark the session ended and return what was seen of it (kept for late feedback)."""
        with self._lock:
            rec = self._sessions.get(session_id) or SessionRecord()
            rec.ended = True
            self._sessions[session_id] = rec
            return SessionRecord(rec.captured, rec.failures, list(rec.trajectory_ids), True)
