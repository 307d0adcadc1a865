"""OS input idle time (keyboard and mouse), per platform, each method optional.

Probes are tried in order; the first that answers wins and is remembered. Linux: X11's
``xprintidle``, systemd-logind's ``IdleSinceHint``, the newest access time of
``/dev/input/event*``, then of the terminals in ``/dev/pts`` (a console user typing).
macOS: ``ioreg``'s ``HIDIdleTime``. Windows: ``GetLastInputInfo``. When none answers (a
headless server) the signal says ``unknown`` and the other signals decide.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime

from metaclaw_core.schedule.signals import Interval, Kind, SignalReading

IdleProbe = Callable[[], float | None]  # seconds since the last input, or None


def _run(cmd: list[str], timeout: float = 2.0) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def probe_xprintidle() -> float | None:
    if not os.environ.get("DISPLAY"):
        return None
    out = _run(["xprintidle"])
    return int(out.strip()) / 1000.0 if out and out.strip().isdigit() else None


def probe_loginctl() -> float | None:
    session = os.environ.get("XDG_SESSION_ID")
    if not session:
        return None
    out = _run(["loginctl", "show-session", session, "-p", "IdleHint", "-p", "IdleSinceHint"])
    if not out:
        return None
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if props.get("IdleHint") != "yes":
        return 0.0
    since_us = int(props.get("IdleSinceHint") or 0)
    return max(0.0, time.time() - since_us / 1e6) if since_us else None


def _newest_access(pattern: str) -> float | None:
    times = []
    for path in glob.glob(pattern):
        try:
            times.append(os.stat(path).st_atime)
        except OSError:
            continue
    return max(0.0, time.time() - max(times)) if times else None


def probe_dev_input() -> float | None:
    return _newest_access("/dev/input/event*")


def probe_tty() -> float | None:
    return _newest_access("/dev/pts/[0-9]*")


def probe_ioreg() -> float | None:
    out = _run(["ioreg", "-c", "IOHIDSystem"])
    m = re.search(r'"HIDIdleTime"\s*=\s*(\d+)', out or "")
    return int(m.group(1)) / 1e9 if m else None


def probe_win32() -> float | None:
    if sys.platform != "win32":
        return None
    import ctypes

    class LASTINPUTINFO(ctypes.Structure):
        _fields_ = [("cbSize", ctypes.c_uint), ("dwTime", ctypes.c_uint)]

    info = LASTINPUTINFO()
    info.cbSize = ctypes.sizeof(info)
    windll = getattr(ctypes, "windll", None)
    if windll is None or not windll.user32.GetLastInputInfo(ctypes.byref(info)):
        return None
    return (windll.kernel32.GetTickCount() - info.dwTime) / 1000.0


PROBES: dict[str, IdleProbe] = {
    "xprintidle": probe_xprintidle,
    "loginctl": probe_loginctl,
    "dev-input": probe_dev_input,
    "tty": probe_tty,
    "ioreg": probe_ioreg,
    "win32": probe_win32,
}


def default_methods() -> list[str]:
    if sys.platform == "darwin":
        return ["ioreg"]
    if sys.platform == "win32":
        return ["win32"]
    return ["xprintidle", "loginctl", "dev-input", "tty"]


class SystemIdleSignal:
    """Away once the OS saw no input for ``idle_s``; *present* (a veto) before that."""

    kind: Kind = "user"

    def __init__(
        self,
        idle_s: float,
        methods: list[str] | None = None,
        *,
        probes: dict[str, IdleProbe] | None = None,
        name: str = "system-idle",
    ) -> None:
        self.name = name
        self.idle_s = idle_s
        wanted = methods or ["auto"]
        if "auto" in wanted:
            wanted = [m for m in wanted if m != "auto"] + default_methods()
        table = probes if probes is not None else PROBES
        self.probes = [(m, table[m]) for m in wanted if m in table]
        self._working: tuple[str, IdleProbe] | None = None

    def idle_seconds(self) -> tuple[str, float] | None:
        candidates = [self._working] if self._working else []
        candidates += [p for p in self.probes if p != self._working]
        for name, probe in candidates:
            try:
                value = probe()
            except Exception:
                value = None
            if value is not None:
                self._working = (name, probe)
                return name, value
        return None

    def read(self, now: datetime) -> SignalReading:
        got = self.idle_seconds()
        if got is None:
            tried = ", ".join(m for m, _ in self.probes) or "none"
            return SignalReading(
                self.name, self.kind, "unknown", f"no idle-time source answered (tried {tried})"
            )
        method, idle = got
        if idle >= self.idle_s:
            return SignalReading(
                self.name, self.kind, "away", f"no input for {idle:.0f}s ({method})"
            )
        return SignalReading(self.name, self.kind, "present", f"input {idle:.0f}s ago ({method})")

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        return None
