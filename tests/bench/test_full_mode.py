"""``full`` mode: the agent is answered by the slow loop's policy (served on loopback), GRPO
steps run after each day on that day's calls, scored by the suite's own multiple-choice
check, and the next day is answered by the new weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaclaw_core import MetaClaw, Settings, hookimpl
from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.bench.runner import BenchRun, RunConfig
from metaclaw_core.bench.suite import load_suite
from metaclaw_core.train.backend import SampledCompletion, SamplingParams
from tests.bench.suites import write_suite
from tests.slowloop.conftest import FakeBackend, FakeSampler
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import Reply, ScriptedOpenAI

ANSWERS = ("\\bbox{B}", "\\bbox{A}", "\\bbox{A,C}", "\\bbox{C}")


class BboxSampler(FakeSampler):
    """Sample i answers ANSWERS[i]: spread in the rewards, so GRPO has a signal."""

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        super().sample(prompt, num_samples, params)  # counts the call, refuses when closed
        texts = [ANSWERS[i % len(ANSWERS)].encode() for i in range(num_samples)]
        return [SampledCompletion(list(t), [-0.5] * len(t)) for t in texts]


class BboxBackend(FakeBackend):
    def training_sampler(self) -> FakeSampler:
        return BboxSampler(f"training@{self.steps}")

    def publish(self, name: str) -> tuple[FakeSampler, str]:
        sampler = BboxSampler(name)
        self.samplers.append(sampler)
        return sampler, f"fake://{name}"


class Backend:
    def __init__(self, backend: BboxBackend) -> None:
        self.backend = backend

    @hookimpl
    def metaclaw_training_backend(self, settings: Settings) -> Any:
        return self.backend


def run_full(tmp_path: Path, minilm: Any, backend: BboxBackend) -> dict[str, Any]:
    """The two-day suite in full mode, trained by ``backend``, 2 GRPO steps a day."""

    def make_engine(settings: Settings) -> MetaClaw:
        settings.load_entrypoints = False
        settings.store.flush_interval_s = 0.02
        settings.train.group_size = 4
        settings.train.prompts_per_step = 4
        return MetaClaw(settings, plugins=[SharedEmbedder(minilm), Backend(backend)])

    suite = load_suite(write_suite(tmp_path / "suite"))
    with ScriptedOpenAI(default=Reply("no skills today")) as evolver:
        config = RunConfig(
            mode="full",
            model=ModelConfig(model="unused", base_url="http://127.0.0.1:9/v1", timeout_s=30),
            # corrections wait for the day's end, so the day's calls stay in the RL buffer
            learn="evolver",
            evolver_base_url=evolver.base_url,
            train_steps_per_day=2,
        )
        return BenchRun(suite, tmp_path / "run", config, engine_factory=make_engine).run()


def test_full_mode_trains_between_days_and_serves_the_new_weights(
    tmp_path: Path, minilm: Any
) -> None:
    backend = BboxBackend()
    summary = run_full(tmp_path, minilm, backend)
    assert summary["days_complete"] == 2 and summary["rounds"] == 3

    day1 = json.loads((tmp_path / "run" / "days" / "day01" / "day.json").read_text())
    training = day1["training"]
    assert "error" not in training, training
    assert training["weights_before"] == "sampler-base"
    trained = [s for s in training["steps"] if s["status"] == "trained"]
    assert trained, training["steps"]
    assert training["weights_after"] == f"sampler-{trained[-1]['step']:06d}"
    assert backend.steps == len(trained) + sum(
        1
        for s in json.loads((tmp_path / "run" / "days" / "day02" / "day.json").read_text())[
            "training"
        ]["steps"]
        if s["status"] == "trained"
    )
    # day 1 was answered by the base weights, day 2 by those trained after day 1
    by_label = {s.label: s for s in backend.samplers}
    assert by_label["sampler-base"].calls == 2  # day 1: two rounds, one call each
    assert by_label[training["weights_after"]].calls == 1  # day 2: one round
    rounds = {
        p.stem: json.loads(p.read_text())
        for p in (tmp_path / "run" / "days" / "day01").glob("r*.json")
    }
    assert rounds["r2"]["answer"] == "\\bbox{B}"  # the policy's answer reached the agent
    assert rounds["r2"]["score"] == 0.0


class BrokenTraining(BboxBackend):
    def forward_backward(self, data: Any, loss_fn: str) -> Any:
        raise RuntimeError("training service unavailable")


def test_a_failing_training_step_is_recorded_and_the_run_goes_on(
    tmp_path: Path, minilm: Any
) -> None:
    backend = BrokenTraining()
    summary = run_full(tmp_path, minilm, backend)
    assert summary["days_complete"] == 2  # the run went on
    for day in ("day01", "day02"):
        training = json.loads((tmp_path / "run" / "days" / day / "day.json").read_text())[
            "training"
        ]
        assert training["error"] == "RuntimeError: training service unavailable"
        # the same keys as a day that trained: the weights did not change
        assert training["weights_before"] == training["weights_after"] == "sampler-base"
        assert training["backend"] == backend.name
