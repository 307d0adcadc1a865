"""OMLS with a controllable clock: each signal opens and closes windows; a window closing
mid-run pauses at the next step boundary with a checkpoint; the next window resumes."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from metaclaw_core.cli import app
from metaclaw_core.schedule import (
    CalendarBusySignal,
    OpportunisticScheduler,
    SleepWindowSignal,
    SystemIdleSignal,
    TrafficIdleSignal,
    busy_intervals,
    run_in_windows,
)
from metaclaw_core.schedule.signals import Interval, Kind, SignalReading, State
from metaclaw_core.train import CheckpointLog, GrpoTrainer, QueryBuffer
from tests.slowloop.conftest import (
    FakeBackend,
    FakeClock,
    answer_index_reward,
    capture_calls,
    train_settings,
)

pytest.importorskip(
    "recurring_ical_events", reason="calendar support needs metaclaw-core[schedule]"
)

SHANGHAI = ZoneInfo("Asia/Shanghai")

# Weekly stand-up Mon/Wed 10:00-11:00 Shanghai, one Wednesday cancelled (EXDATE), a "free"
# event that must not count, and an all-day holiday.
ICS = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//metaclaw tests//EN
BEGIN:VEVENT
UID:standup@test
DTSTART;TZID=Asia/Shanghai:20261102T100000
DTEND;TZID=Asia/Shanghai:20261102T110000
RRULE:FREQ=WEEKLY;BYDAY=MO,WE
EXDATE;TZID=Asia/Shanghai:20261202T100000
SUMMARY:Stand-up
END:VEVENT
BEGIN:VEVENT
UID:focus@test
DTSTART;TZID=Asia/Shanghai:20261130T140000
DTEND;TZID=Asia/Shanghai:20261130T160000
TRANSP:TRANSPARENT
SUMMARY:Focus time (free)
END:VEVENT
BEGIN:VEVENT
UID:holiday@test
DTSTART;VALUE=DATE:20261201
DTEND;VALUE=DATE:20261202
SUMMARY:Holiday
END:VEVENT
END:VCALENDAR
"""


def sh(day: int, hour: int, minute: int = 0) -> datetime:
    """A time in Shanghai (November/December 2026)."""
    month = 11 if day >= 28 else 12
    return datetime(2026, month, day, hour, minute, tzinfo=SHANGHAI)


class ManualSignal:
    """A signal the test sets by hand."""

    def __init__(self, kind: Kind, state: State = "unknown", name: str = "manual") -> None:
        self.name, self.kind, self.state = name, kind, state

    def read(self, now: datetime) -> SignalReading:
        return SignalReading(self.name, self.kind, self.state, "set by the test")

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        return None


def test_sleep_window_is_time_zone_aware() -> None:
    sleep = SleepWindowSignal("23:00", "07:00", SHANGHAI)
    assert sleep.read(sh(30, 23, 30)).state == "away"
    assert sleep.read(sh(30, 6, 59)).state == "away"
    assert sleep.read(sh(30, 7, 0)).state == "unknown"  # awake is not proof of presence
    # 16:00 UTC is midnight in Shanghai.
    assert sleep.read(datetime(2026, 11, 30, 16, 0, tzinfo=UTC)).state == "away"
    assert sleep.read(datetime(2026, 11, 30, 12, 0, tzinfo=UTC)).state == "unknown"
    # Across a DST change the window keeps local wall-clock hours.
    ny = SleepWindowSignal("01:00", "05:00", ZoneInfo("America/New_York"))
    assert ny.read(datetime(2026, 11, 1, 6, 30, tzinfo=UTC)).state == "away"  # 01:30 EST
    assert ny.read(datetime(2026, 11, 1, 10, 30, tzinfo=UTC)).state == "unknown"  # 05:30 EST


def test_calendar_expands_recurring_events(tmp_path: Path) -> None:
    start, end = sh(30, 0), sh(30, 0) + timedelta(days=7)
    busy = busy_intervals(ICS, start, end, zone=SHANGHAI)
    starts = [i.start.astimezone(SHANGHAI) for i in busy]
    # Mon 30 Nov, (Wed 2 Dec cancelled), Mon 7 Dec is outside; the free event and the
    # all-day holiday do not count.
    assert starts == [sh(30, 10)]
    with_all_day = busy_intervals(ICS, start, end, zone=SHANGHAI, all_day_busy=True)
    assert len(with_all_day) == 2
    path = tmp_path / "cal.ics"
    path.write_text(ICS)
    cal = CalendarBusySignal(str(path), zone=SHANGHAI)
    assert cal.read(sh(30, 10, 30)).state == "away"
    assert cal.read(sh(30, 15)).state == "unknown"  # TRANSP:TRANSPARENT
    assert cal.read(sh(2, 10, 30)).state == "unknown"  # EXDATE
    assert cal.read(sh(9, 10, 30)).state == "away"  # a later Wednesday


def test_unreadable_calendar_is_unknown_not_an_error(tmp_path: Path) -> None:
    cal = CalendarBusySignal(str(tmp_path / "missing.ics"), zone=SHANGHAI)
    reading = cal.read(sh(30, 10, 30))
    assert reading.state == "unknown" and "FileNotFoundError" in reading.reason


def test_system_idle_tries_each_method_until_one_answers() -> None:
    calls: list[str] = []

    def broken() -> float | None:
        calls.append("broken")
        raise OSError("no X display")

    def absent() -> float | None:
        calls.append("absent")
        return None

    idle = {"value": 2000.0}
    sig = SystemIdleSignal(
        900,
        ["absent", "broken", "fake"],
        probes={"absent": absent, "broken": broken, "fake": lambda: idle["value"]},
    )
    now = sh(30, 12)
    r = sig.read(now)
    assert (r.state, calls) == ("away", ["absent", "broken"])
    assert "fake" in r.reason
    idle["value"] = 3.0
    assert sig.read(now).state == "present"  # someone is typing: a veto
    none = SystemIdleSignal(900, ["absent"], probes={"absent": absent})
    assert none.read(now).state == "unknown"


def test_windows_open_and_close_on_each_signal(tmp_path: Path) -> None:
    path = tmp_path / "cal.ics"
    path.write_text(ICS)
    idle = {"value": 5000.0}
    last_call = {"t": None}
    clock = FakeClock(sh(30, 20).astimezone(UTC))  # Monday 20:00 Shanghai
    sched = OpportunisticScheduler(
        [
            SleepWindowSignal("23:00", "07:00", SHANGHAI),
            SystemIdleSignal(900, ["fake"], probes={"fake": lambda: idle["value"]}),
            CalendarBusySignal(str(path), zone=SHANGHAI),
            TrafficIdleSignal(lambda: last_call["t"], 600),
        ],
        clock,
    )
    # Evening, no meeting: the OS is idle but nothing says the user is away on purpose? The
    # idle OS does: open.
    assert sched.poll().open
    # Keyboard in use: closed, whatever else says.
    idle["value"] = 10.0
    w = sched.poll()
    assert not w.open and "system-idle" in w.reason
    # Sleep hours while the user still types (upstream's mistake): closed.
    clock.t = sh(30, 23, 30).astimezone(UTC)
    assert not sched.poll().open
    # Sleep hours and the keyboard idle: open.
    idle["value"] = 5000.0
    assert sched.poll().open
    # The agent is called: closed until it has been quiet for δ = 600 s.
    last_call["t"] = clock.now().timestamp()
    w = sched.poll()
    assert not w.open and "agent busy" in w.reason
    clock.advance(599)
    assert not sched.poll().open
    clock.advance(2)
    assert sched.poll().open
    # Daytime meeting (calendar busy), OS idle unknown: open during the stand-up only.
    sig = sched.signals[1]
    assert isinstance(sig, SystemIdleSignal)
    sig.probes = [("none", lambda: None)]
    sig._working = None
    clock.t = sh(2, 10, 30).astimezone(UTC)  # the cancelled Wednesday
    assert not sched.poll().open
    clock.t = sh(7, 10, 30).astimezone(UTC)  # Monday stand-up
    assert sched.poll().open
    clock.t = sh(7, 11, 1).astimezone(UTC)
    w = sched.poll()
    assert not w.open and "no signal says the user is away" in w.reason
    assert [t.open for t in sched.transitions] == [
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
    ]


def test_next_window_combines_sleep_and_calendar(tmp_path: Path) -> None:
    path = tmp_path / "cal.ics"
    path.write_text(ICS)
    sched = OpportunisticScheduler(
        [
            SleepWindowSignal("23:00", "07:00", SHANGHAI),
            CalendarBusySignal(str(path), zone=SHANGHAI),
            TrafficIdleSignal(lambda: None, 600),
        ]
    )
    nxt = sched.next_window(sh(30, 8))
    assert nxt is not None
    assert (nxt.start, nxt.end) == (sh(30, 10), sh(30, 11))
    nxt = sched.next_window(sh(30, 12))
    assert nxt is not None and nxt.start == sh(30, 23) and nxt.end == sh(1, 7)


def _trainer(engine: Any, backend: FakeBackend) -> GrpoTrainer:
    s = train_settings(engine.settings, checkpoint_every=100, prompts_per_step=1)
    return GrpoTrainer(
        backend,
        QueryBuffer(engine.store, engine.library.current_generation),
        answer_index_reward,
        s.train,
        checkpoints=CheckpointLog(engine.store),
    )


def test_window_closing_mid_run_pauses_at_the_step_boundary_and_resumes(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, [f"task {i}" for i in range(8)])
    user = ManualSignal("user", "away")
    agent = ManualSignal("agent", "away")
    clock = FakeClock()
    sched = OpportunisticScheduler([user, agent], clock)
    backend = FakeBackend()
    trainer = _trainer(engine, backend)
    seen_during_step: list[str] = []
    real_step = trainer.step

    def step() -> Any:
        report = real_step()
        seen_during_step.append(f"step {report.step}")
        if report.step == 2:
            user.state = "present"  # the user comes back *during* step 2
        return report

    trainer.step = step  # type: ignore[method-assign]

    def on_sleep(c: FakeClock) -> None:
        if len(c.sleeps) == 3:  # three polls later the user leaves again
            user.state = "away"

    clock.on_sleep = on_sleep
    stats = run_in_windows(trainer, sched, threading.Event(), poll_s=60, max_steps=4)
    # Step 2 finished (no step is cut in half), then the loop paused with a checkpoint.
    assert seen_during_step == ["step 1", "step 2", "step 3", "step 4"]
    i = backend.events.index("save:step-000002")
    assert backend.events[i - 1] == "optim:done"  # saved right after step 2's update
    assert (stats.steps, stats.pauses, stats.windows) == (4, 1, 2)
    assert clock.sleeps == [60, 60, 60]  # it waited while the window was closed
    assert backend.events[-1] == "save:step-000004"  # leaving a window saves too
    # A later process resumes from the checkpoint taken at the pause... or the last one.
    states = CheckpointLog(engine.store).history(backend="fake", kind="state")
    assert [c.step for c in states] == [2, 4]
    again = FakeBackend(saved=backend.saved)
    assert _trainer(engine, again).resume() == 4 and again.steps == 4


def test_training_never_starts_while_the_agent_is_busy(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["a"])
    backend = FakeBackend()
    clock = FakeClock()
    stop = threading.Event()
    clock.on_sleep = lambda c: stop.set() if len(c.sleeps) >= 3 else None
    sched = OpportunisticScheduler(
        [ManualSignal("user", "away"), ManualSignal("agent", "present")], clock
    )
    stats = run_in_windows(_trainer(engine, backend), sched, stop, poll_s=30)
    assert stats.steps == 0 and backend.batches == []


def test_scheduler_cli_reports_signals(make_engine: Any, settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("METACLAW_HOME", str(settings.home))
    monkeypatch.setenv("METACLAW_SCHEDULE__TIMEZONE", "Asia/Shanghai")
    monkeypatch.setenv("METACLAW_SCHEDULE__SYSTEM_IDLE_ENABLED", "false")
    result = CliRunner().invoke(app, ["scheduler", "status", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {s["name"] for s in data["signals"]} == {"sleep", "agent-traffic"}
    nxt = CliRunner().invoke(app, ["scheduler", "next-window", "--json"])
    assert nxt.exit_code == 0, nxt.output
    start = datetime.fromisoformat(json.loads(nxt.output)["start"])
    assert start.astimezone(SHANGHAI).hour in (23, *range(0, 7))
    bad = CliRunner().invoke(
        app, ["scheduler", "status"], env={"METACLAW_SCHEDULE__TIMEZONE": "Mars/Olympus"}
    )
    assert bad.exit_code == 1 and "unknown time zone" in bad.output
