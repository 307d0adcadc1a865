"""``SlowLoop``: the slow loop wired together around one engine.

It builds the backend (hook ``metaclaw_training_backend``), the query buffer, the GRPO trainer,
the served :class:`PolicyServer` and the scheduler (signals from ``metaclaw_idle_signals``),
and runs training in idle windows on a background thread. ``metaclaw serve`` starts one when
``train.enabled``; ``metaclaw train`` runs one in the foreground.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from metaclaw_core.config import Settings
from metaclaw_core.engine import MetaClaw
from metaclaw_core.errors import ConfigError
from metaclaw_core.schedule.signals import IdleSignal
from metaclaw_core.schedule.window import (
    Clock,
    LoopStats,
    OpportunisticScheduler,
    run_in_windows,
)
from metaclaw_core.store.db import TRAJECTORIES, Store
from metaclaw_core.train.backend import TrainingBackend
from metaclaw_core.train.buffer import QueryBuffer
from metaclaw_core.train.checkpoints import CheckpointLog
from metaclaw_core.train.grpo import GrpoTrainer
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.rewards import RewardFn, hook_reward

log = logging.getLogger("metaclaw.train")


def store_last_call_at(store: Store) -> float | None:
    """Epoch seconds of the newest captured trajectory (any process), or None."""
    if not store.has_table(TRAJECTORIES):
        return None
    store.refresh(TRAJECTORIES)
    col = store.table(TRAJECTORIES).search().select(["created_at"]).limit(None).to_arrow()
    if col.num_rows == 0:
        return None
    newest = max(v for v in col["created_at"].to_pylist() if v is not None)
    return float(newest.timestamp()) if isinstance(newest, datetime) else None


def build_signals(engine: MetaClaw, settings: Settings) -> list[IdleSignal]:
    """Every plugin's idle signals; agent traffic reads this engine and the store."""
    from_store: list[float | None] = [None]
    try:
        from_store[0] = store_last_call_at(engine.store)
    except Exception as exc:
        log.warning("metaclaw: cannot read the newest trajectory time: %s", exc)

    def last_call_at() -> float | None:
        seen = [t for t in (engine.last_call_at, from_store[0]) if t is not None]
        return max(seen) if seen else None

    lists = engine.hook.metaclaw_idle_signals(settings=settings, last_call_at=last_call_at)
    return [s for group in lists if group for s in group]


def build_backend(engine: MetaClaw, settings: Settings) -> TrainingBackend:
    backend = engine.hook.metaclaw_training_backend(settings=settings)
    if backend is None:
        raise ConfigError(
            f"metaclaw: no training backend named {settings.train.backend!r}; use 'local' or "
            "'tinker' (METACLAW_TRAIN__BACKEND), or install the plugin that provides it"
        )
    return backend  # type: ignore[no-any-return]


class SlowLoop:
    """Backend + buffer + GRPO trainer + served policy + scheduler for one engine."""

    def __init__(
        self,
        engine: MetaClaw,
        settings: Settings | None = None,
        *,
        backend: TrainingBackend | None = None,
        reward: RewardFn | None = None,
        signals: list[IdleSignal] | None = None,
        clock: Clock | None = None,
        serve: bool = True,
    ) -> None:
        self.engine = engine
        self.settings = settings or engine.settings
        t = self.settings.train
        self.backend = backend or build_backend(engine, self.settings)
        self.buffer = QueryBuffer(
            engine.store, engine.library.current_generation, agent=engine.agent
        )
        self.checkpoints = CheckpointLog(engine.store)
        self.policy = PolicyServer(model_name=t.policy_model_name) if serve else None
        self.trainer = GrpoTrainer(
            self.backend,
            self.buffer,
            reward or hook_reward(engine.hook, self.settings),
            t,
            checkpoints=self.checkpoints,
            policy=self.policy,
        )
        self.scheduler = OpportunisticScheduler(
            signals if signals is not None else build_signals(engine, self.settings), clock
        )
        self.stats: LoopStats | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Load the backend and train in idle windows on a background thread."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="metaclaw-slow-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        poll = self.settings.schedule.poll_interval_s
        while not self._stop.is_set():
            try:
                self.trainer.resume()
                self.stats = run_in_windows(self.trainer, self.scheduler, self._stop, poll_s=poll)
                return
            except Exception as exc:  # training must never take serving down
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("metaclaw: the slow loop failed; retrying in %.0fs", poll)
                self._stop.wait(poll)

    def run(self, *, max_steps: int | None = None) -> LoopStats:
        """Train in idle windows in this thread until interrupted or ``max_steps``."""
        self.trainer.resume()
        self.stats = run_in_windows(
            self.trainer,
            self.scheduler,
            self._stop,
            poll_s=self.settings.schedule.poll_interval_s,
            max_steps=max_steps,
        )
        return self.stats

    def stop(self) -> None:
        self._stop.set()

    def close(self, timeout: float = 120.0) -> None:
        """Stop training (checkpointing what is unsaved) and release the backend."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self.trainer.close()
        finally:
            if self.policy is not None:
                self.policy.close()

    def status(self) -> dict[str, Any]:
        sizes = self.buffer.sizes()
        return {
            "backend": self.backend.name,
            "model": self.backend.model_name,
            "step": self.trainer.step_count,
            "buffer": sizes.__dict__,
            "policy": None
            if self.policy is None or not self.policy.ready
            else {"version": self.policy.current().version, "weights": self.policy.current().label},
            "window": None
            if self.scheduler.state is None
            else {"open": self.scheduler.state.open, "reason": self.scheduler.state.reason},
            "error": self.error,
        }
