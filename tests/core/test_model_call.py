"""The core's wrapper of a host's model call (inject → call → capture, failing open) and the
role / tool-call normalisation the adapters share."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from metaclaw_core import (
    CallContext,
    Message,
    MetaClaw,
    ModelCall,
    ModelOutput,
    Skill,
    normalise_role,
    record_fault,
    tool_arguments,
    tool_call,
)


def _ctx(text: str = "Write the release notes for version 2") -> CallContext:
    return CallContext(
        framework="test",
        messages=[Message(role="system", content="You help."), Message(role="user", content=text)],
    )


@pytest.fixture
def engine_with_skill(engine: MetaClaw) -> MetaClaw:
    engine.add_skills(
        Skill(
            name="release-notes",
            description="Writing release notes for a new version",
            body="List breaking changes first.",
        )
    )
    return engine


def test_a_wrapped_call_injects_then_captures(engine_with_skill: MetaClaw) -> None:
    engine = engine_with_skill
    with engine.model_call(_ctx(), output_of=lambda r: ModelOutput(text=r["text"])) as call:
        assert call.injection is not None and call.injection.skill_names == ["release-notes"]
        call.result = {"text": "Breaking: none."}
    assert call.trajectory_id is not None and engine.flush(10)
    t = engine.trajectories.get(call.trajectory_id)
    assert t is not None
    assert t.output.text == "Breaking: none." and t.injected_skills == ["release-notes"]
    assert t.latency_ms is not None and t.error is None


def test_the_hosts_error_is_captured_and_raised(engine: MetaClaw) -> None:
    with pytest.raises(TimeoutError), engine.model_call(_ctx()) as call:
        raise TimeoutError("the model timed out")
    assert call.trajectory_id is not None and engine.flush(10)
    t = engine.trajectories.get(call.trajectory_id)
    assert t is not None and t.error == "TimeoutError: the model timed out"
    assert t.outcome == "error"


def test_an_internal_failure_is_a_fault_not_the_hosts_problem(engine: MetaClaw) -> None:
    def broken(result: Any) -> ModelOutput:
        raise ValueError("cannot read this result")

    before = engine.faults.counts["adapter (capture)"]
    with engine.model_call(_ctx(), output_of=broken, where="adapter") as call:
        call.result = "the host's answer"
    assert call.result == "the host's answer" and call.trajectory_id is None
    assert engine.faults.counts["adapter (capture)"] == before + 1


def test_no_context_means_no_wrapping(engine: MetaClaw) -> None:
    with engine.model_call(None) as call:
        call.result = "answer"
    assert call.injection is None and call.trajectory_id is None


def test_the_async_wrapper(engine_with_skill: MetaClaw) -> None:
    engine = engine_with_skill

    async def host() -> str | None:
        async with engine.model_call(_ctx()) as call:
            assert call.injection is not None and call.injection.skill_names
            call.result = "Breaking: none."
        return call.trajectory_id

    tid = asyncio.run(host())
    assert tid is not None and engine.flush(10)
    t = engine.trajectories.get(tid)
    assert t is not None and t.output.text == "Breaking: none."


def test_a_capture_only_wrapper_keeps_the_given_injection(engine_with_skill: MetaClaw) -> None:
    engine = engine_with_skill
    ctx = _ctx()
    injection = engine.before_call(ctx)
    with engine.model_call(ctx, inject=False, injection=injection) as call:
        assert call.injection is injection
        call.result = "ok"
    assert call.trajectory_id is not None and engine.flush(10)
    t = engine.trajectories.get(call.trajectory_id)
    assert t is not None and t.injected_skills == injection.skill_names


@pytest.mark.parametrize(
    ("name", "default", "expected"),
    [
        ("human", "user", "user"),
        ("ai", "user", "assistant"),
        ("developer", "user", "system"),
        ("function", "user", "tool"),
        ("CHATBOT", "user", "assistant"),
        ("narrator", "user", "user"),
        ("narrator", "assistant", "assistant"),
        (None, "assistant", "assistant"),
    ],
)
def test_roles_are_normalised_once(name: str | None, default: Any, expected: str) -> None:
    assert normalise_role(name, default) == expected


def test_an_enum_role_is_read_by_its_value() -> None:
    class Role:
        value = "assistant"

    assert normalise_role(Role(), "user") == "assistant"


def test_tool_call_arguments_become_json_text() -> None:
    assert tool_arguments('{"a": 1}') == '{"a": 1}'
    assert tool_arguments({"city": "Zürich"}) == '{"city": "Zürich"}'
    assert tool_arguments(None) == "{}"
    call = tool_call(7, None, {"n": 1})
    assert (call.id, call.name, call.arguments) == ("7", "", '{"n": 1}')


def test_the_fault_recorder_never_raises_even_for_a_broken_engine(engine: MetaClaw) -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"broken engine: {name}")

    record_fault(Broken(), "adapter", ValueError("x"))  # logged, not raised
    before = engine.faults.counts["adapter"]
    record_fault(engine, "adapter", ValueError("x"))
    assert engine.faults.counts["adapter"] == before + 1
    with ModelCall(Broken(), _ctx()) as call:  # type: ignore[arg-type]
        call.result = "the host's answer"
    assert call.result == "the host's answer" and call.trajectory_id is None
