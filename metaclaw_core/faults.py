"""Fail-open support: rate-limited logging of internal errors, and counts for `status`."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any


class FaultLog:
    """Logs each kind of internal error at most once per ``interval_s``; counts all of them."""

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.counts: Counter[str] = Counter()
        self._last: dict[str, float] = {}
        self._suppressed: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def record(self, where: str, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            self.counts[where] += 1
            self.last_error = f"{where}: {type(exc).__name__}: {exc}"
            last = self._last.get(where)
            if last is not None and now - last < self.interval_s:
                self._suppressed[where] += 1
                return
            suppressed = self._suppressed.pop(where, 0)
            self._last[where] = now
        more = f" ({suppressed} more since last report)" if suppressed else ""
        self.logger.warning(
            "metaclaw: %s failed, the call goes on without it: %s: %s%s",
            where,
            type(exc).__name__,
            exc,
            more,
            exc_info=self.logger.isEnabledFor(logging.DEBUG),
        )

    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())


_log = logging.getLogger("metaclaw")


def record_fault(engine: Any, where: str, exc: BaseException) -> None:
    """Fail open, for adapters: count and log the internal failure ``exc`` on ``engine``
    (rate-limited, reported by ``metaclaw status``) and let the host's call go on. Never
    raises, even when ``engine`` itself is what failed."""
    try:
        engine.record_fault(where, exc)
    except Exception:
        _log.warning("metaclaw: %s failed, the call goes on without it: %r", where, exc)
