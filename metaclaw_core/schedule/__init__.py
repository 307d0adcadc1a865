"""OMLS, the opportunistic scheduler: idle signals and the training-window state machine."""

from metaclaw_core.schedule.calendar import CalendarBusySignal, busy_intervals
from metaclaw_core.schedule.signals import (
    IdleSignal,
    Interval,
    SignalReading,
    SleepWindowSignal,
    TrafficIdleSignal,
)
from metaclaw_core.schedule.system_idle import SystemIdleSignal
from metaclaw_core.schedule.window import (
    Clock,
    IdleWindow,
    OpportunisticScheduler,
    SystemClock,
    decide,
    run_in_windows,
)

__all__ = [
    "CalendarBusySignal",
    "Clock",
    "IdleSignal",
    "IdleWindow",
    "Interval",
    "OpportunisticScheduler",
    "SignalReading",
    "SleepWindowSignal",
    "SystemClock",
    "SystemIdleSignal",
    "TrafficIdleSignal",
    "busy_intervals",
    "decide",
    "run_in_windows",
]
