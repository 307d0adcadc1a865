"""The capture record built on the hot path: what it keeps, redacts, repairs, and hands on."""

from pathlib import Path
from typing import Any

from metaclaw_core import CallContext, Message, ModelOutput, ToolCall, Trajectory, hookimpl
from metaclaw_core.store.journal import read_records, segment_files
from metaclaw_core.store.records import decode

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


class Seen:
    """A host's plugin: records what prepare and the observers were given."""

    def __init__(self) -> None:
        self.prepared: list[Trajectory] = []
        self.stored: list[Trajectory] = []

    @hookimpl
    def metaclaw_prepare_trajectory(self, trajectory: Trajectory, settings: Any) -> None:
        self.prepared.append(trajectory.model_copy(deep=True))

    @hookimpl
    def metaclaw_trajectories_stored(self, trajectories: list[Trajectory]) -> None:
        self.stored.extend(trajectories)


def call() -> tuple[CallContext, ModelOutput]:
    c = CallContext(
        session_id="s",
        framework="test",
        model="m",
        metadata={"user": "u1"},
        messages=[
            Message(role="system", content="sys"),
            Message(role="user", content=f"Deploy with {SECRET} now"),
            Message(
                role="assistant",
                content="",
                tool_calls=[ToolCall(id="c1", name="deploy", arguments='{"env": "prod"}')],
            ),
            Message(role="tool", content="ok", tool_call_id="c1", name="deploy"),
        ],
    )
    out = ModelOutput(text="Deployed.", finish_reason="stop", usage={"total_tokens": 12})
    return c, out


def test_observers_and_the_store_get_the_same_full_trajectory(
    make_engine: Any, settings: Any
) -> None:
    seen = Seen()
    engine = make_engine(settings, plugins=[seen])
    c, out = call()
    tid = engine.after_call(c, out, latency_ms=12.5)
    assert tid is not None and engine.flush()
    stored = engine.trajectories.get(tid)
    assert stored is not None
    (observed,) = seen.stored
    for t in (stored, observed):
        assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool"]
        assert t.messages[2].tool_calls[0].name == "deploy"
        assert t.messages[3].tool_call_id == "c1" and t.messages[3].name == "deploy"
        assert t.output.text == "Deployed." and t.output.usage == {"total_tokens": 12}
        assert t.session_id == "s" and t.framework == "test" and t.latency_ms == 12.5
        # the secret is in the user's message and in the query taken from it
        assert t.metadata["user"] == "u1" and t.metadata["redacted"] == 2
        assert SECRET not in t.messages[1].content
    assert observed.model_dump(exclude={"rewards"}) == stored.model_dump(exclude={"rewards"})


def test_a_host_prepare_plugin_gets_the_trajectory_already_redacted(
    make_engine: Any, settings: Any
) -> None:
    seen = Seen()
    engine = make_engine(settings, plugins=[seen])
    c, out = call()
    assert engine.after_call(c, out)
    (prepared,) = seen.prepared
    assert "[REDACTED:openai-key]" in prepared.messages[1].content
    assert SECRET in c.messages[1].content  # the host's own objects are untouched


def test_unregistering_the_builtin_redaction_turns_it_off(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    engine.pm.unregister(name="builtin:redact")
    c, out = call()
    tid = engine.after_call(c, out)
    assert tid is not None and engine.flush()
    t = engine.trajectories.get(tid)
    assert t is not None and SECRET in t.messages[1].content and "redacted" not in t.metadata


def test_text_that_is_not_valid_unicode_is_repaired_and_kept(
    make_engine: Any, settings: Any
) -> None:
    """A lone surrogate (bytes decoded with surrogateescape) cannot be written as UTF-8; the
    capture replaces it and says so rather than losing the call (it used to be lost)."""
    engine = make_engine(settings)
    c = CallContext(
        messages=[Message(role="user", content="file name b'caf\udce9' broke")],
        metadata={"huge": 2**70, "name": "x\udc80"},  # orjson holds neither
    )
    tid = engine.after_call(c, "bad \udcff output")
    assert tid is not None and engine.flush()
    t = engine.trajectories.get(tid)
    assert t is not None and t.metadata["sanitized"] is True
    assert t.messages[0].content == "file name b'caf?' broke" and t.output.text == "bad ? output"
    assert t.metadata["huge"] == str(2**70) and t.metadata["name"] == "x?"


def test_the_journal_line_reads_back_as_the_trajectory(engine: Any, settings: Any) -> None:
    c, out = call()
    tid = engine.after_call(c, out)
    assert tid is not None
    (segment,) = [s for d in Path(settings.spool_dir).iterdir() for s in segment_files(d)]
    (_, line), *_ = list(read_records(segment))
    kind, record = decode(line)
    assert kind == "t" and record.id == tid
    t = record.trajectory
    assert t.messages[1].content.startswith("Deploy with [REDACTED:openai-key]")
    assert t.output.finish_reason == "stop" and t.metadata["redacted"] == 2
    assert record.vector is None  # no injection: no query vector travels
