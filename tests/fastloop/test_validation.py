"""Replay validation: a candidate is admitted on evidence from the agent's own model.

The agent's model is a scripted server whose answer depends on which rule is in the
prompt; the check that scored the original calls scores the replays.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, ModelOutput, Trajectory
from metaclaw_core.evolve import SkillEvolver
from metaclaw_core.evolve.validation import replay_rows
from metaclaw_core.reward import CallableCheck
from metaclaw_core.train.backend import SampledCompletion, SamplingParams
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.tokenize import ByteTokenizer
from tests.fastloop.conftest import fastloop_settings, skills_reply
from tests.support.scripted_openai import RecordedRequest, Reply, ScriptedOpenAI

ISO_RULE = "Write every time as an ISO 8601 timestamp with its UTC offset."
FRENCH_RULE = "Answer greetings in French."
SYSTEM = "You are a helpful scheduling assistant."


def agent_answer(req: RecordedRequest) -> Reply:
    """The agent's model: it follows whichever rule its system prompt carries."""
    body = req.json
    system = " ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "system")
    task = str(body["messages"][-1]["content"])
    if "hello" in task.lower():
        return Reply("Bonjour l'équipe !" if FRENCH_RULE in system else "Hello team!")
    return Reply("2026-12-01T09:30:00+08:00" if ISO_RULE in system else "at 9:30")


def check(t: Trajectory) -> bool | None:
    """The verifiable check that judged the original calls (and judges the replays)."""
    if "hello" in t.query.lower():
        return "hello" in t.output.text.lower()
    if "standup" in t.query.lower() or "review" in t.query.lower():
        return "+08:00" in t.output.text
    return None


@pytest.fixture
def agent() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(responder=agent_answer) as server:
        yield server


def engine_with(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, validation_url: str | None, **kw: Any
) -> MetaClaw:
    settings = fastloop_settings(tmp_path / "h", llm.base_url)
    settings.validation.base_url = validation_url
    settings.validation.model = "agent-model"
    settings.validation.timeout_s = 1.0
    settings.validation.deadline_s = 10.0
    for k, v in kw.items():
        setattr(settings.validation, k, v)
    return make_engine(settings, plugins=[CallableCheck(check)])  # type: ignore[no-any-return]


def call(engine: MetaClaw, task: str, answer: str) -> str:
    ctx = CallContext(
        messages=[Message(role="system", content=SYSTEM), Message(role="user", content=task)],
        model="agent-model",
    )
    engine.before_call(ctx)
    tid = engine.after_call(ctx, ModelOutput(text=answer))
    assert tid is not None
    return tid


def seed(engine: MetaClaw) -> tuple[list[str], list[str]]:
    """Two failures the ISO rule fixes, two successes a French rule would break."""
    failures = [
        call(engine, "Log when the Singapore standup starts (9:30 local)", "at 9:30"),
        call(engine, "Note when the Tokyo review starts (9:30 local)", "at 9:30"),
    ]
    successes = [
        call(engine, "Say hello to the team", "Hello team!"),
        call(engine, "Say hello to the new team members", "Hello team!"),
    ]
    assert engine.flush(10)
    assert engine.fastloop.wait_idle(20)  # the check scored all four
    return failures, successes


ISO = {
    "name": "iso-times",
    "description": "Use when writing or logging a date or time.",
    "body": ISO_RULE,
    "failures": [1, 2],
}
FRENCH = {
    "name": "greet-in-french-with-iso-times",
    "description": "Use when greeting the team, saying hello, or logging a time.",
    "body": f"{ISO_RULE} {FRENCH_RULE}",
    "failures": [1, 2],
}


def test_a_candidate_that_fixes_its_failures_is_admitted_with_the_numbers(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url)
    failures, _ = seed(engine)
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()

    assert report.live == ["iso-times"]
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "validated"
    assert cand.validation.fixed == 2 and cand.validation.regressed == 0
    # The replay is the recorded request with the block the engine renders, at its place.
    replayed = [r.json for r in agent.chat_requests()]
    iso_calls = [b for b in replayed if "standup" in b["messages"][-1]["content"]]
    assert iso_calls and iso_calls[0]["model"] == "agent-model"
    system = iso_calls[0]["messages"][0]["content"]
    assert system.startswith(SYSTEM) and system.rstrip().endswith("</metaclaw-skills>")
    assert "## iso-times" in system and ISO_RULE in system
    rows = replay_rows(engine, "iso-times")
    assert sorted(r["trajectory_id"] for r in rows if r["kind"] == "failure") == sorted(failures)
    assert {r["outcome"] for r in rows if r["kind"] == "failure"} == {"fixed"}
    assert all(r["evolution_id"] == report.id for r in rows)
    stored = json.loads(SkillEvolver(engine).log.recent(1)[0]["report_json"])
    assert stored["candidates"][0]["validation"]["state"] == "validated"


def test_a_candidate_that_breaks_a_recorded_success_is_refused(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url)
    _, successes = seed(engine)
    llm.enqueue(skills_reply(FRENCH))
    report = SkillEvolver(engine).evolve()

    assert report.live == [] and report.rejected == ["greet-in-french-with-iso-times"]
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "failed"
    assert cand.validation.fixed == 2 and cand.validation.regressed >= 1
    assert any("validation failed" in r and "regressed" in r for r in cand.reasons)
    regressed = [r for r in replay_rows(engine) if r["outcome"] == "regressed"]
    assert regressed and {r["trajectory_id"] for r in regressed} <= set(successes)
    assert "greet-in-french-with-iso-times" not in [s.name for s in engine.library.live()]


def test_on_fail_quarantine_holds_the_candidate_for_a_person(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url, on_fail="quarantine")
    seed(engine)
    llm.enqueue(skills_reply(FRENCH))
    report = SkillEvolver(engine).evolve()
    assert report.quarantined == ["greet-in-french-with-iso-times"]
    ((_skill, review),) = engine.library.pending_reviews()
    assert any(f.check == "validation" for f in review.findings)


@pytest.mark.parametrize("how", ["down", "slow"])
def test_a_validation_endpoint_down_or_slow_leaves_the_candidate_unvalidated_never_live(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, how: str
) -> None:
    if how == "down":
        dead = ScriptedOpenAI().start()
        url = dead.base_url
        dead.stop()  # nothing listens there any more
        server = None
    else:
        server = ScriptedOpenAI(default=Reply("2026-12-01T09:30:00+08:00", delay_s=3.0)).start()
        url = server.base_url
    try:
        engine = engine_with(make_engine, tmp_path, llm, url)
        seed(engine)
        llm.enqueue(skills_reply(ISO))
        report = SkillEvolver(engine).evolve()
    finally:
        if server is not None:
            server.stop()
    assert report.live == [] and report.quarantined == ["iso-times"]
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "unvalidated"
    assert cand.validation.errors >= 1
    assert "iso-times" not in [s.name for s in engine.library.live()]
    assert [s.name for s in engine.library.pending()] == ["iso-times"]
    assert {r["outcome"] for r in replay_rows(engine)} == {"error"}


def test_without_a_validation_endpoint_the_report_says_not_validated(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, None)
    seed(engine)
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()
    assert report.live == ["iso-times"]
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "not-validated"
    assert "not validated" in cand.validation.message
    assert replay_rows(engine) == []


def test_the_per_evolution_budget_bounds_the_replays(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url, budget_calls=1)
    seed(engine)
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()
    assert len(agent.chat_requests()) == 1
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "unvalidated"
    assert report.quarantined == ["iso-times"]  # required: never live on a budget cut


class RuleSampler:
    """The trained policy's weights: the same rule-following agent as ``agent_answer``."""

    label = "rl-step-3"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        text = ByteTokenizer().decode(prompt)
        self.prompts.append(text)
        system = text.split("<metaclaw-skills>", 1)[-1] if "<metaclaw-skills>" in text else ""
        answer = "2026-12-01T09:30:00+08:00" if ISO_RULE in system else "at 9:30"
        return [SampledCompletion(tokens=[*answer.encode()], logprobs=[0.0] * len(answer))]

    def close(self) -> None:
        pass


def test_the_trained_policy_answers_the_replays_when_one_serves_and_no_endpoint_is_named(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, None)
    failures, _ = seed(engine)
    policy = PolicyServer(ByteTokenizer(), model_name="metaclaw-policy")
    sampler = RuleSampler()
    policy.publish(sampler)
    engine.serving_policy = policy  # what the slow-loop runtime does when it serves
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "validated", cand.validation
    assert cand.validation.fixed == 2
    assert len(sampler.prompts) >= 2 and all(ISO_RULE in p for p in sampler.prompts)
    rows = replay_rows(engine, "iso-times")
    assert {r["model"] for r in rows} == {"metaclaw-policy"}
    assert sorted(r["trajectory_id"] for r in rows if r["kind"] == "failure") == sorted(failures)


def test_a_policy_without_weights_yet_is_no_validation_model(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, None)
    seed(engine)
    engine.serving_policy = PolicyServer(ByteTokenizer())  # nothing published
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()
    (cand,) = report.candidates
    assert cand.validation is not None and cand.validation.state == "not-validated"
    assert replay_rows(engine) == []


def test_a_named_validation_endpoint_wins_over_the_serving_policy(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI
) -> None:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url)
    seed(engine)
    policy = PolicyServer(ByteTokenizer())
    sampler = RuleSampler()
    policy.publish(sampler)
    engine.serving_policy = policy
    llm.enqueue(skills_reply(ISO))
    report = SkillEvolver(engine).evolve()
    assert report.candidates[0].validation is not None
    assert report.candidates[0].validation.state == "validated"
    assert sampler.prompts == [] and agent.chat_requests()
