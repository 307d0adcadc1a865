import asyncio
from pathlib import Path
from typing import Any

from metaclaw_core import (
    CallContext,
    Message,
    MetaClaw,
    ModelOutput,
    Skill,
    ToolCall,
)

SKILL = Skill(
    name="iso-timestamps",
    description="When writing or logging dates and times",
    body="Write timestamps in ISO 8601 with an explicit offset.",
)


def ctx(text: str, session: str = "s1") -> CallContext:
    return CallContext(
        session_id=session,
        framework="test",
        model="m",
        messages=[Message(role="system", content="sys"), Message(role="user", content=text)],
    )


def test_capture_records_what_the_model_saw_said_and_was_given(engine: MetaClaw) -> None:
    engine.add_skills(SKILL)
    c = ctx("Write the date and time of the meeting in the log")
    inj = engine.before_call(c)
    c.messages[0] = Message(role="system", content=inj.apply_to_system("sys"))
    out = ModelOutput(
        text="",
        tool_calls=[
            ToolCall(id="c1", name="append_log", arguments='{"t": "2026-12-01T09:30:00+00:00"}')
        ],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 10, "completion_tokens": 5},
    )
    tid = engine.after_call(c, out)
    assert tid is not None and engine.flush(10)
    t = engine.trajectories.get(tid)
    assert t is not None
    assert t.session_id == "s1" and t.framework == "test" and t.model == "m"
    assert t.injected_skills == ["iso-timestamps"] and t.generation == 1
    assert "<metaclaw-skills>" in t.messages[0].content
    assert t.output.tool_calls[0].name == "append_log" and t.output.usage["completion_tokens"] == 5
    assert t.query == "Write the date and time of the meeting in the log"
    assert t.latency_ms is not None and t.latency_ms >= 0


def test_trajectory_carries_the_generation_in_force_at_before_call(engine: MetaClaw) -> None:
    engine.add_skills(SKILL)
    c = ctx("Write the date and time of the meeting in the log")
    engine.before_call(c)
    engine.add_skills(Skill(name="other", description="Other things", body="Do other things."))
    assert engine.generation == 2
    tid = engine.after_call(c, "done")  # matched to its before_call by call_id
    engine.flush()
    t = engine.trajectories.get(tid or "")
    assert t is not None and t.generation == 1 and t.injected_skills == ["iso-timestamps"]


def test_feedback_is_stored_as_rewards(engine: MetaClaw) -> None:
    tid = engine.after_call(ctx("anything"), "ok")
    assert tid is not None
    engine.feedback(tid, 1.0, detail="great")
    engine.feedback(tid, -0.5, source="judge")
    engine.flush()
    t = engine.trajectories.get(tid)
    assert t is not None
    assert sorted((r.source, r.value) for r in t.rewards) == [("judge", -0.5), ("user", 1.0)]
    assert t.reward == 0.25


def test_async_twins(engine: MetaClaw) -> None:
    engine.add_skills(SKILL)

    async def run() -> str | None:
        c = ctx("Write the time of the incident in the report")
        inj = await engine.abefore_call(c)
        assert inj.skill_names == ["iso-timestamps"]
        tid = await engine.aafter_call(c, "done", injection=inj)
        await engine.afeedback(tid or "", 1.0)
        return tid

    tid = asyncio.run(run())
    engine.flush()
    t = engine.trajectories.get(tid or "")
    assert t is not None and t.reward == 1.0


def test_secrets_are_redacted_before_the_spool_and_the_store(
    engine: MetaClaw, settings: Any
) -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    c = ctx(f"Use my key {secret} to call the API")
    out = ModelOutput(
        tool_calls=[ToolCall(name="call", arguments='{"password": "hunter2hunter2"}')]
    )
    tid = engine.after_call(c, out)
    assert secret in c.messages[1].content  # the host's objects are untouched
    spool_text = b"".join(p.read_bytes() for p in Path(settings.spool_dir).rglob("*.jsonl"))
    assert secret.encode() not in spool_text and b"hunter2hunter2" not in spool_text
    engine.flush()
    t = engine.trajectories.get(tid or "")
    assert t is not None
    assert "[REDACTED:openai-key]" in t.messages[1].content
    assert "hunter2hunter2" not in t.output.tool_calls[0].arguments
    assert t.metadata["redacted"] == 3  # message, tool arguments, and the query


def test_oversized_trajectory_is_capped_and_marked_not_dropped(
    make_engine: Any, settings: Any
) -> None:
    settings.capture.max_messages = 10
    settings.capture.max_message_chars = 1000
    settings.capture.max_total_chars = 5000
    engine = make_engine(settings)
    msgs = [Message(role="system", content="sys")] + [
        Message(role="user" if i % 2 else "assistant", content=f"{i} " + "x" * 3000)
        for i in range(50)
    ]
    c = CallContext(messages=msgs)
    tid = engine.after_call(c, "y" * 50_000)
    assert tid is not None and engine.flush()
    t = engine.trajectories.get(tid)
    assert t is not None and t.truncated
    assert len(t.messages) == 10 and t.messages[0].content == "sys"
    assert t.messages[-1].content.startswith("49 ")  # the latest turns are kept
    assert sum(len(m.content) for m in t.messages) <= 5000 + 200
    assert "truncated" in t.output.text and len(t.output.text) < 1100
    assert t.metadata["truncated"]["dropped_messages"] == 41
