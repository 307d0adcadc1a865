"""``SlowLoop``: the slow loop wired together around one engine.

It builds the backend (hook ``metaclaw_training_backend``), the query buffer, the GRPO trainer,
the served :class:`PolicyServer` and the scheduler (signals from ``metaclaw_idle_signals``),
and runs training in idle windows on a background thread. ``metaclaw serve`` starts one when
``train.enabled``; ``metaclaw train`` runs one in the foreground.

Agents: one *lane* per agent it trains (``train.agents``; default the engine's agent alone),
each with its own query buffer, backend (a LoRA over that agent's base model,
``train.agent_base_models``), trainer and served policy. :class:`FairTrainer` gives each
training step to the least recently trained lane that has data, so a busy agent cannot starve
a quiet one; the proxy serves each caller its agent's policy.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from metaclaw_core.agents import validate_agent
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
from metaclaw_core.train.grpo import GrpoTrainer, StepReport
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


@dataclass
class Lane:
    """What the slow loop trains for one agent: its buffer, LoRA (backend), trainer, policy."""

    agent: str
    base_model: str
    backend: TrainingBackend
    buffer: QueryBuffer
    trainer: GrpoTrainer
    policy: PolicyServer | None
    last_trained: float = float("-inf")  # time.monotonic() of its last trained step
    steps: int = 0


class FairTrainer:
    """The window loop's trainer over several lanes: each step goes to the least recently
    trained lane whose buffer has data (round robin while all have data; a lane without data
    is passed over, not waited for)."""

    def __init__(self, lanes: list[Lane]) -> None:
        self.lanes = lanes
        self.last: Lane | None = None

    def resume(self) -> None:
        for lane in self.lanes:
            lane.trainer.resume()

    def step(self) -> StepReport | None:
        report: StepReport | None = None
        order = sorted(range(len(self.lanes)), key=lambda i: (self.lanes[i].last_trained, i))
        for i in order:
            lane = self.lanes[i]
            report = lane.trainer.step()
            if report.status == "trained":
                lane.last_trained = time.monotonic()
                lane.steps += 1
                self.last = lane
                return report
        return report  # nothing to train in any lane: the last lane's "empty" report

    def checkpoint(self) -> str | None:
        paths = [lane.trainer.checkpoint() for lane in self.lanes]
        return next((p for p in paths if p), None)

    @property
    def step_count(self) -> int:
        return sum(lane.trainer.step_count for lane in self.lanes)


class SlowLoop:
    """Backend + buffer + GRPO trainer + served policy + scheduler for one engine (one lane
    per agent it trains, scheduled fairly)."""

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
        self.checkpoints = CheckpointLog(engine.store)
        score = reward or hook_reward(engine.hook, self.settings)
        agents = list(dict.fromkeys(validate_agent(a) for a in t.agents)) or [engine.agent]
        self.lanes: list[Lane] = []
        for i, agent in enumerate(agents):
            model = t.agent_base_models.get(agent, t.base_model)
            lane_settings = self.settings
            if model != t.base_model:
                lane_settings = self.settings.model_copy(deep=True)
                lane_settings.train.base_model = model
            lane_backend = backend if (backend is not None and i == 0) else None
            lane_backend = lane_backend or build_backend(engine, lane_settings)
            buffer = QueryBuffer(
                engine.store, engine.library_of(agent).current_generation, agent=agent
            )
            policy = PolicyServer(model_name=t.policy_model_name) if serve else None
            trainer = GrpoTrainer(
                lane_backend,
                buffer,
                score,
                t,
                checkpoints=self.checkpoints,
                policy=policy,
            )
            self.lanes.append(Lane(agent, model, lane_backend, buffer, trainer, policy))
        first = self.lanes[0]  # the single-agent names: the first lane's
        self.backend, self.buffer, self.trainer, self.policy = (
            first.backend,
            first.buffer,
            first.trainer,
            first.policy,
        )
        self.fair = FairTrainer(self.lanes)
        # Replay validation's default model: the policy of the engine's own agent's lane
        # (else the first lane's).
        own = next((lane for lane in self.lanes if lane.agent == engine.agent), first)
        if own.policy is not None:
            engine.serving_policy = own.policy
        engine.serving_policies = {**engine.serving_policies, **self.policies}
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
                self.fair.resume()
                self.stats = run_in_windows(self.fair, self.scheduler, self._stop, poll_s=poll)
                return
            except Exception as exc:  # training must never take serving down
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("metaclaw: the slow loop failed; retrying in %.0fs", poll)
                self._stop.wait(poll)

    def run(self, *, max_steps: int | None = None) -> LoopStats:
        """Train in idle windows in this thread until interrupted or ``max_steps``."""
        self.fair.resume()
        self.stats = run_in_windows(
            self.fair,
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
        errors: list[BaseException] = []
        for lane in self.lanes:
            try:
                lane.trainer.close()
            except BaseException as exc:  # close every lane; raise the first failure after
                errors.append(exc)
            finally:
                if lane.policy is not None:
                    if self.engine.serving_policy is lane.policy:
                        self.engine.serving_policy = None
                    if self.engine.serving_policies.get(lane.agent) is lane.policy:
                        self.engine.serving_policies = {
                            a: p for a, p in self.engine.serving_policies.items() if a != lane.agent
                        }
                    lane.policy.close()
        if errors:
            raise errors[0]

    @property
    def policies(self) -> dict[str, PolicyServer]:
        """The served policy of each agent the loop trains."""
        return {lane.agent: lane.policy for lane in self.lanes if lane.policy is not None}

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
            "lanes": [
                {
                    "agent": lane.agent,
                    "base_model": lane.base_model,
                    "backend": lane.backend.name,
                    "step": lane.trainer.step_count,
                    "query": lane.buffer.sizes().query if len(self.lanes) > 1 else sizes.query,
                }
                for lane in self.lanes
            ],
        }
