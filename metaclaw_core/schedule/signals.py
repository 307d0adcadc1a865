"""Idle signals: each says, at a given time, whether the user is away or the agent is quiet.

A reading is ``away``, ``present`` or ``unknown``. Signals of kind ``user`` describe the
person (sleep window, OS input idle time, calendar); signals of kind ``agent`` describe the
agent's traffic. The scheduler opens a window only when some user signal says away, no user
signal says present, and every agent signal says away (quiet) — so sleep hours alone never
open a window while the keyboard is in use (upstream MetaClaw's mistake).

Time-based signals also *predict*: ``away_intervals(start, end)`` lists when they will say
away, which is what ``metaclaw scheduler next-window`` combines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Literal, Protocol, runtime_checkable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from metaclaw_core.errors import ConfigError

State = Literal["away", "present", "unknown"]
Kind = Literal["user", "agent"]
LastCallSource = Callable[[], float | None]


@dataclass(frozen=True)
class SignalReading:
    """One signal's answer at one time, with the reason a person can read."""

    signal: str
    kind: Kind
    state: State
    reason: str
    until: datetime | None = None  # when this reading is known to change, if known


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime


@runtime_checkable
class IdleSignal(Protocol):
    """A source of away/present readings (a plugin contributes these)."""

    name: str
    kind: Kind

    def read(self, now: datetime) -> SignalReading:
        """The reading at ``now`` (an aware datetime). Must be cheap and never raise."""
        ...

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        """When this signal will say away between ``start`` and ``end``; None if it cannot
        predict (system idle, traffic)."""
        ...


def resolve_zone(name: str | None) -> tzinfo:
    """An IANA zone by name; None means the system's local zone."""
    if name is None:
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"metaclaw: unknown time zone {name!r} in schedule.timezone; use an IANA name such "
            "as 'Europe/Berlin' or 'Asia/Shanghai'"
        ) from exc


def parse_hhmm(text: str, what: str) -> tuple[int, int]:
    try:
        hh, mm = text.strip().split(":")
        h, m = int(hh), int(mm)
        if not (0 <= h < 24 and 0 <= m < 60):
            raise ValueError
    except ValueError:
        raise ConfigError(f"metaclaw: {what} must be HH:MM (24-hour), not {text!r}") from None
    return h, m


class SleepWindowSignal:
    """Away between ``start`` and ``end`` local time (the window may cross midnight).

    Outside the window it says ``unknown``, not ``present``: being awake is no proof of
    being at the keyboard.
    """

    kind: Kind = "user"

    def __init__(self, start: str, end: str, zone: tzinfo, name: str = "sleep") -> None:
        self.name = name
        self.start = parse_hhmm(start, "schedule.sleep_start")
        self.end = parse_hhmm(end, "schedule.sleep_end")
        self.zone = zone

    def _windows_around(self, local: datetime) -> list[Interval]:
        out = []
        for day in (-1, 0, 1):
            d = (local + timedelta(days=day)).date()
            s = datetime(d.year, d.month, d.day, *self.start, tzinfo=self.zone)
            e = datetime(d.year, d.month, d.day, *self.end, tzinfo=self.zone)
            if e <= s:
                e += timedelta(days=1)
            out.append(Interval(s, e))
        return out

    def read(self, now: datetime) -> SignalReading:
        local = now.astimezone(self.zone)
        for w in self._windows_around(local):
            if w.start <= local < w.end:
                return SignalReading(
                    self.name, self.kind, "away", f"sleep window until {w.end:%H:%M}", w.end
                )
        nxt = min((w.start for w in self._windows_around(local) if w.start > local), default=None)
        return SignalReading(self.name, self.kind, "unknown", "outside the sleep window", nxt)

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval]:
        out: list[Interval] = []
        day = start.astimezone(self.zone)
        while day - timedelta(days=1) < end:
            for w in self._windows_around(day):
                if w.end > start and w.start < end and w not in out:
                    out.append(w)
            day += timedelta(days=1)
        return sorted(out, key=lambda w: w.start)


class TrafficIdleSignal:
    """The agent is quiet when no call arrived for ``quiet_s`` seconds (kind ``agent``)."""

    kind: Kind = "agent"

    def __init__(
        self,
        last_call_at: LastCallSource,
        quiet_s: float,
        *,
        name: str = "agent-traffic",
        started_at: float | None = None,
    ) -> None:
        self.name = name
        self.last_call_at = last_call_at
        self.quiet_s = quiet_s
        # Before any call is seen, quiet time counts from ``started_at`` (None: the agent has
        # been quiet for as long as anyone knows).
        self.started_at = started_at

    def read(self, now: datetime) -> SignalReading:
        try:
            last = self.last_call_at()
        except Exception as exc:
            return SignalReading(self.name, self.kind, "unknown", f"cannot read traffic: {exc}")
        ref = last if last is not None else self.started_at
        if ref is None:
            return SignalReading(self.name, self.kind, "away", "no agent call seen")
        quiet_for = now.timestamp() - ref
        seen = "last call" if last is not None else "watching since start;"
        if quiet_for >= self.quiet_s:
            return SignalReading(
                self.name,
                self.kind,
                "away",
                f"quiet for {quiet_for:.0f}s ({seen} {quiet_for:.0f}s ago)",
            )
        until = datetime.fromtimestamp(ref + self.quiet_s, tz=now.tzinfo)
        return SignalReading(self.name, self.kind, "present", f"{seen} {quiet_for:.0f}s ago", until)

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        return None
