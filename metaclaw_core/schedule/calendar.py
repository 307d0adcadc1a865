"""Calendar busy: the user is away from the agent during a busy event of an ICS feed or file.

Recurring events (RRULE, RDATE, EXDATE, moved instances) are expanded with ``icalendar`` and
``recurring-ical-events`` (pure Python; the ``schedule`` extra). Events marked free
(``TRANSP:TRANSPARENT``) or cancelled do not count; all-day events count only with
``schedule.calendar_all_day_busy``. A feed is re-read every ``calendar_refresh_s``; when it
cannot be read the last good copy is used, and with none the signal says ``unknown``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from metaclaw_core.schedule.signals import Interval, Kind, SignalReading

log = logging.getLogger("metaclaw.schedule")


def _aware(value: date | datetime, zone: tzinfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    return datetime(value.year, value.month, value.day, tzinfo=zone)


def busy_intervals(
    ics: bytes | str, start: datetime, end: datetime, *, zone: tzinfo, all_day_busy: bool = False
) -> list[Interval]:
    """Busy intervals of the calendar overlapping [start, end), sorted, merged."""
    import icalendar
    import recurring_ical_events

    cal = icalendar.Calendar.from_ical(ics)
    found: list[Interval] = []
    for ev in recurring_ical_events.of(cal).between(start, end):
        if str(ev.get("TRANSP", "OPAQUE")).upper() == "TRANSPARENT":
            continue
        if str(ev.get("STATUS", "")).upper() == "CANCELLED":
            continue
        dtstart = ev.get("DTSTART")
        if dtstart is None:
            continue
        s_val = dtstart.dt
        all_day = not isinstance(s_val, datetime)
        if all_day and not all_day_busy:
            continue
        dtend = ev.get("DTEND")
        if dtend is not None:
            e_val = dtend.dt
        elif ev.get("DURATION") is not None:
            e_val = s_val + ev.get("DURATION").dt
        else:
            e_val = s_val + (timedelta(days=1) if all_day else timedelta(0))
        s, e = _aware(s_val, zone), _aware(e_val, zone)
        if e > s:
            found.append(Interval(s, e))
    found.sort(key=lambda i: i.start)
    merged: list[Interval] = []
    for i in found:
        if merged and i.start <= merged[-1].end:
            merged[-1] = Interval(merged[-1].start, max(merged[-1].end, i.end))
        else:
            merged.append(i)
    return merged


class CalendarBusySignal:
    """Away while an opaque event of the calendar is on; ``unknown`` otherwise."""

    kind: Kind = "user"

    def __init__(
        self,
        source: str,
        *,
        zone: tzinfo,
        refresh_s: float = 900.0,
        all_day_busy: bool = False,
        name: str = "calendar",
        fetch_timeout_s: float = 10.0,
    ) -> None:
        self.name = name
        self.source = source
        self.zone = zone
        self.refresh_s = refresh_s
        self.all_day_busy = all_day_busy
        self.fetch_timeout_s = fetch_timeout_s
        self._ics: bytes | None = None
        self._read_at = -1e18
        self._error: str | None = None
        self._lock = threading.Lock()

    def _load(self) -> bytes | None:
        with self._lock:
            if time.monotonic() - self._read_at < self.refresh_s:
                return self._ics
            self._read_at = time.monotonic()
            try:
                if self.source.startswith(("http://", "https://", "webcal://")):
                    import httpx

                    url = self.source.replace("webcal://", "https://", 1)
                    resp = httpx.get(url, timeout=self.fetch_timeout_s, follow_redirects=True)
                    resp.raise_for_status()
                    self._ics = resp.content
                else:
                    self._ics = Path(self.source).expanduser().read_bytes()
                self._error = None
            except Exception as exc:  # keep the last good copy
                self._error = f"{type(exc).__name__}: {exc}"
                log.warning("metaclaw: cannot read the calendar %s: %s", self.source, exc)
            return self._ics

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        ics = self._load()
        if ics is None:
            return None
        try:
            return busy_intervals(ics, start, end, zone=self.zone, all_day_busy=self.all_day_busy)
        except ImportError:
            self._error = (
                "calendar support needs `pip install icalendar recurring-ical-events` "
                "(the metaclaw-core[schedule] extra)"
            )
            return None
        except Exception as exc:
            self._error = f"cannot parse the calendar: {exc}"
            return None

    def read(self, now: datetime) -> SignalReading:
        events = self.away_intervals(now - timedelta(days=1), now + timedelta(days=1))
        if events is None:
            return SignalReading(self.name, self.kind, "unknown", self._error or "no calendar")
        for i in events:
            if i.start <= now < i.end:
                return SignalReading(
                    self.name,
                    self.kind,
                    "away",
                    f"busy until {i.end.astimezone(self.zone):%H:%M}",
                    i.end,
                )
        nxt = next((i.start for i in events if i.start > now), None)
        return SignalReading(self.name, self.kind, "unknown", "no busy event now", nxt)

    def status(self) -> dict[str, Any]:
        return {"source": self.source, "loaded": self._ics is not None, "error": self._error}
