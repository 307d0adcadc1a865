"""Shared pieces for the slow-loop tests: a cheap fake backend, seeded engines, a fake clock."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Settings
from metaclaw_core.train.backend import (
    AdamConfig,
    SampledCompletion,
    SamplingParams,
    StepMetrics,
    TrainDatum,
)
from metaclaw_core.train.tokenize import ByteTokenizer

os.environ.setdefault("TINKER_TELEMETRY", "0")


class FakeSampler:
    """Samples ``answer <i> from <label>``; refuses to run once closed."""

    def __init__(self, label: str, delay_s: float = 0.0) -> None:
        self._label = label
        self.delay_s = delay_s
        self.closed = False
        self.used_after_close = 0
        self.calls = 0
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self._label

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        with self._lock:
            self.calls += 1
        if self.closed:
            self.used_after_close += 1
            raise RuntimeError(f"sampler {self._label} used after close")
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.closed:  # closed while this request was using it: the swap was not atomic
            self.used_after_close += 1
            raise RuntimeError(f"sampler {self._label} closed under a request")
        out = []
        for i in range(num_samples):
            toks = [*f"answer {i} from {self._label}".encode()][: params.max_tokens]
            out.append(SampledCompletion(toks, [-0.25] * len(toks)))
        return out

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeBackend:
    """A training backend whose "weights" are the number of optimiser steps taken."""

    name: str = "fake"
    model_name: str = "fake-model"
    saved: dict[str, int] = field(default_factory=dict)  # path -> steps (survives "restarts")
    steps: int = 0
    events: list[str] = field(default_factory=list)
    batches: list[list[TrainDatum]] = field(default_factory=list)
    resumed_from: str | None = None
    started: bool = False
    samplers: list[FakeSampler] = field(default_factory=list)
    step_delay_s: float = 0.0

    def __post_init__(self) -> None:
        self._tokenizer = ByteTokenizer()
        self._pool = ThreadPoolExecutor(1)

    @property
    def tokenizer(self) -> ByteTokenizer:
        return self._tokenizer

    def start(self, resume_from: str | None = None) -> None:
        if self.started:
            return
        self.started = True
        self.resumed_from = resume_from
        if resume_from is not None:
            self.steps = self.saved[resume_from]
        self.events.append(f"start:{resume_from}")

    def training_sampler(self) -> FakeSampler:
        return FakeSampler(f"training@{self.steps}")

    def forward_backward(self, data: list[TrainDatum], loss_fn: str) -> Future[StepMetrics]:
        self.events.append("fwd_bwd:submit")
        self.batches.append(list(data))

        def run() -> StepMetrics:
            time.sleep(self.step_delay_s)
            self.events.append("fwd_bwd:done")
            return StepMetrics({"loss:sum": -sum(sum(d.advantages) for d in data)})

        return self._pool.submit(run)

    def optim_step(self, adam: AdamConfig) -> Future[StepMetrics]:
        self.events.append("optim:submit")

        def run() -> StepMetrics:
            self.steps += 1
            self.events.append("optim:done")
            return StepMetrics({"lr:mean": adam.learning_rate})

        return self._pool.submit(run)

    def save_state(self, name: str) -> str:
        path = f"fake://{name}"
        self.saved[path] = self.steps
        self.events.append(f"save:{name}")
        return path

    def publish(self, name: str) -> tuple[FakeSampler, str]:
        sampler = FakeSampler(name)
        self.samplers.append(sampler)
        self.events.append(f"publish:{name}")
        return sampler, f"fake://{name}"

    def close(self) -> None:
        self.events.append("close")


def capture_calls(
    engine: MetaClaw, texts: list[str], *, system: str = "Be brief.", agent: str | None = None
) -> list[str]:
    """Run ``before_call``/``after_call`` for each text (as ``agent``'s calls when given);
    return the trajectory ids."""
    ids = []
    for text in texts:
        ctx = CallContext(
            messages=[Message(role="system", content=system), Message(role="user", content=text)],
            agent=agent,
        )
        engine.before_call(ctx)
        tid = engine.after_call(ctx, f"reply to {text}")
        assert tid is not None
        ids.append(tid)
    assert engine.flush(30)
    return ids


def answer_index_reward(prompt: Any, text: str) -> float:
    """1 for even sample indices, 0 for odd: every group has spread."""
    return 1.0 if " 0 " in f" {text} " or " 2 " in f" {text} " else 0.0


class FakeClock:
    """A controllable clock: ``now`` moves only when the test (or a sleep) moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        self.t = start or datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
        self.sleeps: list[float] = []
        self.on_sleep: Any = None

    def now(self) -> datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        if self.on_sleep is not None:
            self.on_sleep(self)


@pytest.fixture
def fake_backend() -> FakeBackend:
    return FakeBackend()


def train_settings(settings: Settings, **overrides: Any) -> Settings:
    t = settings.train
    t.group_size = 4
    t.prompts_per_step = 2
    t.max_new_tokens = 16
    t.checkpoint_every = 2
    for k, v in overrides.items():
        setattr(t, k, v)
    return settings
