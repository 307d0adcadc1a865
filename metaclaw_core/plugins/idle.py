"""Built-in idle signals for the scheduler: sleep window, OS idle, calendar, agent traffic."""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.schedule.calendar import CalendarBusySignal
from metaclaw_core.schedule.signals import (
    IdleSignal,
    LastCallSource,
    SleepWindowSignal,
    TrafficIdleSignal,
    resolve_zone,
)
from metaclaw_core.schedule.system_idle import SystemIdleSignal


@hookimpl
def metaclaw_idle_signals(settings: Settings, last_call_at: LastCallSource) -> list[IdleSignal]:
    s = settings.schedule
    zone = resolve_zone(s.timezone)
    signals: list[IdleSignal] = []
    if s.sleep_enabled:
        signals.append(SleepWindowSignal(s.sleep_start, s.sleep_end, zone))
    if s.system_idle_enabled:
        signals.append(SystemIdleSignal(s.system_idle_s, s.system_idle_methods))
    if s.calendar_ics:
        signals.append(
            CalendarBusySignal(
                s.calendar_ics,
                zone=zone,
                refresh_s=s.calendar_refresh_s,
                all_day_busy=s.calendar_all_day_busy,
            )
        )
    signals.append(TrafficIdleSignal(last_call_at, s.agent_quiet_s))
    return signals
