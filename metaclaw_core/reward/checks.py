"""Verifiable checks as reward sources: a command's exit status, or a Python callable.

Both are plugins (``metaclaw_score_trajectory``): register one with
``MetaClaw(plugins=[CommandCheck(["pytest", "-q"])])``, or set ``rewards.check_command``. A
check that does not apply answers None, and the next source (the judge) is asked.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Callable, Sequence

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Reward, Trajectory

log = logging.getLogger("metaclaw.checks")

NOT_APPLICABLE = 125  # like `git bisect run`: "skip this one"


class CommandCheck:
    """Run ``command`` for a trajectory (its JSON on stdin; ``METACLAW_TRAJECTORY_ID`` set).

    Exit 0 scores +1; exit 125 means the check does not apply (no score); any other exit
    scores -1. A command that cannot start or runs past ``timeout_s`` gives no score.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float = 30.0,
        source: str = "check",
        applies: Callable[[Trajectory], bool] | None = None,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ValueError("a check command cannot be empty")
        self.timeout_s = timeout_s
        self.source = source
        self.applies = applies

    def score(self, trajectory: Trajectory) -> Reward | None:
        if self.applies is not None and not self.applies(trajectory):
            return None
        env = {**os.environ, "METACLAW_TRAJECTORY_ID": trajectory.id}
        try:
            done = subprocess.run(
                self.argv,
                input=trajectory.model_dump_json(),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            log.warning("metaclaw: check %s timed out after %.0fs", self.argv[0], self.timeout_s)
            return None
        except OSError as exc:
            log.warning("metaclaw: check %s could not run: %s", self.argv[0], exc)
            return None
        if done.returncode == NOT_APPLICABLE:
            return None
        ok = done.returncode == 0
        detail = f"{shlex.join(self.argv)[:120]}: exit {done.returncode}"
        tail = (done.stderr or done.stdout or "").strip()[-200:]
        if tail and not ok:
            detail += f": {tail}"
        return Reward(
            trajectory_id=trajectory.id,
            value=1.0 if ok else -1.0,
            source=self.source,
            detail=detail,
        )

    @hookimpl
    def metaclaw_score_trajectory(
        self, trajectory: Trajectory, settings: Settings
    ) -> Reward | None:
        return self.score(trajectory)


class CallableCheck:
    """``fn(trajectory)`` → True (+1), False (-1), a float in [-1, 1], or None (no score)."""

    def __init__(
        self, fn: Callable[[Trajectory], bool | float | None], *, source: str = "check"
    ) -> None:
        self.fn = fn
        self.source = source

    def score(self, trajectory: Trajectory) -> Reward | None:
        verdict = self.fn(trajectory)
        if verdict is None:
            return None
        value = (1.0 if verdict else -1.0) if isinstance(verdict, bool) else float(verdict)
        value = max(-1.0, min(1.0, value))
        name = getattr(self.fn, "__name__", "check")
        return Reward(trajectory_id=trajectory.id, value=value, source=self.source, detail=name)

    @hookimpl
    def metaclaw_score_trajectory(
        self, trajectory: Trajectory, settings: Settings
    ) -> Reward | None:
        return self.score(trajectory)
