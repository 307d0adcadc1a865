"""``full`` mode over the real Tinker SDK (0.38) against the fake Tinker server on 127.0.0.1.

The agent (the real LangChain agent with the MetaClaw middleware) is answered by the policy
the slow loop serves from Tinker samplers; after each day a GRPO step goes out through the
SDK (``forward_backward`` + ``optim_step``), on the day's calls of the skill generation in
force, the new weights are published, and the next day is answered by them. Samples are
scored by the bench's own :class:`~metaclaw_core.bench.policy.BenchCheck`.

The fake's samplers answer ``w<steps> s<i>``; for this test only, each sample also ends in a
``\\bbox{...}`` so that the multiple-choice check gives each GRPO group a spread (and the
rounds a real score). The choice rotates with the weights: the served answer (sample 0) of
the base weights is right on day 1's choices, that of the weights trained after day 1 on
day 2's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from metaclaw_core import MetaClaw, Settings
from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.bench.runner import BenchRun, RunConfig
from metaclaw_core.bench.suite import load_suite
from metaclaw_core.train.buffer import TRAIN_SAMPLES, QueryBuffer
from metaclaw_core.train.tokenize import ByteTokenizer, chat_messages
from tests.bench.suites import day01, day02, write_suite
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import RecordedRequest, Reply, ScriptedOpenAI

pytest.importorskip("tinker", reason="the tinker SDK is not installed (metaclaw-core[tinker])")
os.environ.setdefault("TINKER_TELEMETRY", "0")

from tinker.proto import tinker_public_pb2 as pb

from tests.slowloop import fake_tinker
from tests.slowloop.fake_tinker import END, FakeTinkerServer

# Sample i of weights w chooses CHOICES[(w + i) % 4]: w0 s0 is right on day 1's choices
# (A,C), w1 s0 on day 2's (B); every group mixes right and wrong answers.
CHOICES = ("A,C", "B", "A", "C")
MAX_PROMPT_TOKENS = 2048
SKILL = {
    "name": "iso-meeting-times",
    "description": "Use when recording or checking meeting times.",
    "body": "Write meeting times as full ISO 8601 datetimes with the +08:00 offset, "
    "e.g. 2026-03-16T09:30:00+08:00.",
    "category": "formatting",
    "updates": None,
    "failures": [1],
}
R3 = {
    "id": "r3",
    "type": "multi_choice",
    "question": "Which of these dates are written as YYYY-MM-DD?\nA. 2026-03-16\n"
    "B. 16/03/2026\nC. 2026-03-17\nAnswer using \\bbox{X,Y} format.",
    "feedback": {"correct": "Right: A and C.", "options": {"B": "B is day first."}},
    "eval": {
        "options": {"A": "2026-03-16", "B": "16/03/2026", "C": "2026-03-17"},
        "answer": ["A", "C"],
    },
}


def sample_text(steps: int, i: int) -> str:
    return f"w{steps} s{i} \\bbox{{{CHOICES[(steps + i) % len(CHOICES)]}}}"


def bbox_sample_proto(steps: int, num_samples: int, max_tokens: int) -> bytes:
    """The fake's sample response, with a ``\\bbox{...}`` after ``w<steps> s<i>``."""
    resp = pb.SampleResponse()
    for i in range(num_samples):
        toks = [*[*sample_text(steps, i).encode()][: max(1, max_tokens - 1)], END]
        seq = resp.sequences.add()
        seq.stop_reason = pb.STOP_REASON_STOP
        seq.tokens = np.asarray(toks, dtype=np.int32).tobytes()
        seq.logprobs = np.full(len(toks), -0.5, dtype=np.float32).tobytes()
    return resp.SerializeToString()


class Evolver:
    """The evolver LLM: one skill for the first day's failures, nothing after."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, req: RecordedRequest) -> Reply:
        self.calls += 1
        return Reply(json.dumps({"skills": [SKILL] if self.calls == 1 else []}))


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_full_mode_over_tinker_trains_between_days_and_serves_the_new_weights(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_tinker, "sample_proto", bbox_sample_proto)
    first = day01()
    first["rounds"].append(R3)  # one call more than day 1's training step takes
    suite = load_suite(write_suite(tmp_path / "suite", [first, day02()]))
    evolver = Evolver()
    with FakeTinkerServer() as tinker_server, ScriptedOpenAI(responder=evolver) as llm:

        def make_engine(settings: Settings) -> MetaClaw:
            settings.load_entrypoints = False
            settings.store.flush_interval_s = 0.02
            t = settings.train
            t.backend = "tinker"  # the built-in plugin builds the real TinkerBackend
            t.base_model = "Fake/Model-1B"
            t.tokenizer = "bytes"
            t.tinker_base_url = tinker_server.base_url
            t.tinker_api_key = SecretStr("tml-fake-key")
            t.lora_rank = 8
            t.group_size = 4
            t.prompts_per_step = 2
            t.max_prompt_tokens = MAX_PROMPT_TOKENS
            return MetaClaw(settings, plugins=[SharedEmbedder(minilm)])

        config = RunConfig(
            mode="full",
            model=ModelConfig(model="unused", base_url="http://127.0.0.1:9/v1", timeout_s=30),
            learn="evolver",  # what the docs advise for full: the generation moves at day end
            evolver_base_url=llm.base_url,
            evolver_model="scripted-evolver",
            train_steps_per_day=1,
        )
        run_dir = tmp_path / "run"
        summary = BenchRun(suite, run_dir, config, engine_factory=make_engine).run()
    assert summary["days_complete"] == 2 and summary["rounds"] == 4
    state = tinker_server.state

    rounds = {f"{p.parent.name}/{p.stem}": _json(p) for p in sorted(run_dir.glob("days/*/r*.json"))}
    assert set(rounds) == {"day01/r1", "day01/r2", "day01/r3", "day02/r1"}
    for r in rounds.values():
        assert r["error"] is None and r["model_calls"] == 1, r
        assert len(r["trajectory_ids"]) == 1, r

    # The rounds were answered by the Tinker samplers: day 1 by the base weights (w0), day 2
    # by the weights trained after day 1 (w1), swapped in without restarting anything.
    for key in ("day01/r1", "day01/r2", "day01/r3"):
        assert rounds[key]["answer"] == sample_text(0, 0), key
    assert rounds["day02/r1"]["answer"] == sample_text(1, 0)
    # scored by the suite's own checks: nothing was written for the file check; the choices
    # were right
    assert [rounds[k]["score"] for k in sorted(rounds)] == [0.0, 1.0, 1.0, 1.0]

    # The evolver turned day 1's failure into a skill after the day's training: g0 -> g1.
    g0 = rounds["day01/r1"]["generation"]
    g1 = g0 + 1
    assert {rounds[k]["generation"] for k in ("day01/r1", "day01/r2", "day01/r3")} == {g0}
    assert rounds["day02/r1"]["generation"] == g1
    assert rounds["day02/r1"]["injected"] == [SKILL["name"]]

    # day.json records the training: one step per day on the generation in force, the new
    # weights published for the next day.
    day1 = _json(run_dir / "days" / "day01" / "day.json")
    day2 = _json(run_dir / "days" / "day02" / "day.json")
    assert (day1["generation_start"], day1["generation_end"]) == (g0, g1)
    assert [e.get("live") for e in day1["evolutions"]] == [[SKILL["name"]]]
    assert evolver.calls == 1  # day 1 had a failure, day 2 none
    assert (day2["generation_start"], day2["generation_end"]) == (g1, g1)
    for day, before, after, step, generation, prompts, dropped in (
        # day 1: the two oldest calls; the file check's samples have no score (group dropped)
        (day1, "sampler-base", "sampler-000001", 1, g0, 2, 1),
        (day2, "sampler-000001", "sampler-000002", 2, g1, 1, 0),
    ):
        training = day["training"]
        assert "error" not in training, training
        assert training["backend"] == "tinker"
        assert (training["weights_before"], training["weights_after"]) == (before, after)
        [trained] = training["steps"]
        assert trained["status"] == "trained" and trained["step"] == step, trained
        assert (trained["generation"], trained["prompts"]) == (generation, prompts)
        assert (trained["groups_kept"], trained["groups_dropped"]) == (1, dropped)
        assert trained["datums"] == 4
        assert trained["published"].endswith(f"/sampler_weights/{after}")
        assert trained["metrics"]["step:max"] == step  # the fake server's optim_step result
    # day01/r2 at w0: A,C right (+1), B wrong (-1), A and C 2/3 right (+1/3 each)
    assert day1["training"]["steps"][0]["mean_reward"] == pytest.approx(1 / 6, abs=1e-5)
    # day02/r1 at w1: only B right
    assert day2["training"]["steps"][0]["mean_reward"] == pytest.approx(-0.5, abs=1e-5)

    # The GRPO steps reached the Tinker server: one LoRA model, two forward_backward +
    # optim_step pairs, a resumable checkpoint after each day.
    [model] = state.models.values()
    assert model.base_model == "Fake/Model-1B" and model.rank == 8
    assert model.steps == 2 and len(model.fwd_bwd) == 2 and len(state.optim) == 2
    assert state.calls.count("forward_backward") == 2 and state.calls.count("optim_step") == 2
    assert state.calls.count("load_weights") == 0  # one training client for the whole run
    assert all(f["loss_fn"] == "importance_sampling" for f in model.fwd_bwd)
    ckpts = {p.rsplit("/", 1)[1]: steps for p, (_, steps) in state.checkpoints.items()}
    assert ckpts == {
        "sampler-base": 0,
        "sampler-000001": 1,
        "sampler-000002": 2,
        "step-000001": 1,
        "step-000002": 2,
    }

    # Support/query separation: each day trained on that day's calls of the generation in
    # force. day01/r3 was left in the buffer by day 1's one step; once the evolver moved the
    # library to g1 it became support, and day 2 trained on day 2's call alone.
    settings = Settings(home=run_dir / "metaclaw", load_entrypoints=False)
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    try:
        tok = ByteTokenizer()
        tids = {key: r["trajectory_ids"][0] for key, r in rounds.items()}

        def prompt_of(key: str) -> list[int]:
            t = engine.trajectories.get(tids[key])
            assert t is not None, key
            return tok.encode_chat(chat_messages(t.messages))[-MAX_PROMPT_TOKENS:]

        prompts = {key: prompt_of(key) for key in rounds}
        assert len({tuple(p) for p in prompts.values()}) == 4
        for fwd, key, steps in (
            (model.fwd_bwd[0], "day01/r2", 0),
            (model.fwd_bwd[1], "day02/r1", 1),
        ):
            prompt = prompts[key]
            completions = set()
            for d in fwd["data"]:
                assert d["model_input"][: len(prompt)] == prompt, key
                completions.add(tok.decode(d["model_input"][len(prompt) :]))
            # the group was sampled from the weights in training at the time
            assert completions == {sample_text(steps, i) for i in range(4)}

        gens = {
            key: getattr(engine.trajectories.get(t), "generation", None) for key, t in tids.items()
        }
        assert gens == {"day01/r1": g0, "day01/r2": g0, "day01/r3": g0, "day02/r1": g1}
        rows = engine.store.table(TRAIN_SAMPLES).search().limit(None).to_arrow().to_pylist()
        consumed = sorted((s["step"], s["trajectory_id"], s["generation"]) for s in rows)
        assert consumed == sorted(
            [
                (1, tids["day01/r1"], g0),
                (1, tids["day01/r2"], g0),
                (2, tids["day02/r1"], g1),
            ]
        )
        sizes = QueryBuffer(engine.store, engine.library.current_generation).sizes()
        assert (sizes.generation, sizes.query, sizes.consumed, sizes.support) == (g1, 0, 1, 3)
    finally:
        engine.close()
