"""The window state machine (OMLS): when training may run, and the loop that pauses and resumes.

A window is open when some user signal says away, no user signal says present, and every
agent signal says the agent is quiet. :func:`run_in_windows` runs short training steps while
the window is open, re-checks it between steps, checkpoints and pauses when it closes, and
resumes from that checkpoint when the next window opens. Serving never waits on any of this:
training runs on its own thread and publishes weights by reference swap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from metaclaw_core.schedule.signals import IdleSignal, Interval, SignalReading

log = logging.getLogger("metaclaw.schedule")


class Clock(Protocol):
    """Where the scheduler gets the time (tests pass a controllable one)."""

    def now(self) -> datetime: ...

    def sleep(self, seconds: float, stop: threading.Event) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        stop.wait(seconds)


@dataclass(frozen=True)
class IdleWindow:
    """The scheduler's decision at one moment, with every signal's reading."""

    open: bool
    at: datetime
    reason: str
    readings: list[SignalReading] = field(default_factory=list)


def decide(readings: list[SignalReading], at: datetime) -> IdleWindow:
    """The rule: user away (some away, none present) and the agent quiet."""
    user = [r for r in readings if r.kind == "user"]
    agent = [r for r in readings if r.kind == "agent"]
    present = [r for r in user if r.state == "present"]
    away = [r for r in user if r.state == "away"]
    busy_agent = [r for r in agent if r.state != "away"]
    if present:
        reason = "user present: " + "; ".join(f"{r.signal} ({r.reason})" for r in present)
        return IdleWindow(False, at, reason, readings)
    if not away:
        return IdleWindow(False, at, "no signal says the user is away", readings)
    if busy_agent:
        reason = "agent busy: " + "; ".join(f"{r.signal} ({r.reason})" for r in busy_agent)
        return IdleWindow(False, at, reason, readings)
    reason = "user away (" + ", ".join(r.signal for r in away) + ") and agent quiet"
    return IdleWindow(True, at, reason, readings)


class OpportunisticScheduler:
    """Reads the signals and tracks the open/closed state with its transitions."""

    def __init__(self, signals: list[IdleSignal], clock: Clock | None = None) -> None:
        self.signals = list(signals)
        self.clock = clock or SystemClock()
        self.state: IdleWindow | None = None
        self.opened_at: datetime | None = None
        self.transitions: list[IdleWindow] = []

    def read(self, now: datetime | None = None) -> list[SignalReading]:
        at = now or self.clock.now()
        out = []
        for s in self.signals:
            try:
                out.append(s.read(at))
            except Exception as exc:  # a broken plugin signal must not stop the scheduler
                out.append(SignalReading(s.name, s.kind, "unknown", f"signal failed: {exc}"))
        return out

    def poll(self, now: datetime | None = None) -> IdleWindow:
        at = now or self.clock.now()
        window = decide(self.read(at), at)
        if self.state is None or window.open != self.state.open:
            self.transitions.append(window)
            self.opened_at = at if window.open else None
            log.info(
                "metaclaw: training window %s: %s",
                "opens" if window.open else "closed",
                window.reason,
            )
        self.state = window
        return window

    def next_window(
        self, now: datetime | None = None, horizon: timedelta = timedelta(hours=48)
    ) -> Interval | None:
        """The next interval in which the time-based user signals say away and none of the
        predictable ones says present, within ``horizon`` (system idle and agent traffic
        cannot be predicted: the window then also needs them)."""
        start = now or self.clock.now()
        end = start + horizon
        spans: list[Interval] = []
        for s in self.signals:
            if s.kind != "user":
                continue
            try:
                got = s.away_intervals(start, end)
            except Exception:
                got = None
            spans += got or []
        spans = sorted((i for i in spans if i.end > start), key=lambda i: i.start)
        if not spans:
            return None
        first = spans[0]
        merged_end = first.end
        for i in spans[1:]:
            if i.start <= merged_end:
                merged_end = max(merged_end, i.end)
        return Interval(max(first.start, start), merged_end)


class Steppable(Protocol):
    """What the window loop drives (a :class:`metaclaw_core.train.grpo.GrpoTrainer`)."""

    def step(self) -> Any: ...

    def checkpoint(self) -> str | None: ...


@dataclass
class LoopStats:
    steps: int = 0
    pauses: int = 0
    windows: int = 0
    idle_polls: int = 0
    last_result: Any = None


def run_in_windows(
    trainer: Steppable,
    scheduler: OpportunisticScheduler,
    stop: threading.Event,
    *,
    poll_s: float = 30.0,
    max_steps: int | None = None,
    on_pause: Callable[[IdleWindow], None] | None = None,
    empty_backoff_s: float | None = None,
) -> LoopStats:
    """Train in idle windows until ``stop`` is set (or ``max_steps`` steps were taken).

    Between two steps the window is re-checked; when it has closed the trainer checkpoints and
    the loop waits for the next window. A step that found nothing to train on waits one poll.
    """
    stats = LoopStats()
    was_open = False
    clock = scheduler.clock
    while not stop.is_set():
        window = scheduler.poll()
        if not window.open:
            if was_open:
                stats.pauses += 1
                trainer.checkpoint()
                if on_pause is not None:
                    on_pause(window)
                log.info("metaclaw: training paused (%s)", window.reason)
            was_open = False
            stats.idle_polls += 1
            clock.sleep(poll_s, stop)
            continue
        if not was_open:
            stats.windows += 1
            was_open = True
        result = trainer.step()
        stats.last_result = result
        status = getattr(result, "status", "trained")
        if status == "trained":
            stats.steps += 1
        if max_steps is not None and stats.steps >= max_steps:
            break
        if status != "trained":
            clock.sleep(empty_backoff_s if empty_backoff_s is not None else poll_s, stop)
    if was_open:
        trainer.checkpoint()
    return stats
