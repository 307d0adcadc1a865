"""The query buffer: support/query separation by skill generation, persistence, status."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from metaclaw_core import CallContext, Message, Skill
from metaclaw_core.cli import app
from metaclaw_core.train import QueryBuffer
from tests.slowloop.conftest import capture_calls


def _skill(name: str) -> Skill:
    return Skill(name=name, description=f"{name} rule", body=f"Always {name}.")


def test_stale_samples_leave_buffer_when_generation_advances(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    buffer = QueryBuffer(engine.store, engine.library.current_generation)
    old = capture_calls(engine, ["first task", "second task"])
    assert buffer.query_ids() == old
    engine.add_skills(_skill("cite-sources"))  # generation 0 -> 1
    assert buffer.generation() == 1
    assert buffer.query_ids() == []
    sizes = buffer.sizes()
    assert (sizes.query, sizes.support) == (0, 2)  # kept in the store as support data
    new = capture_calls(engine, ["third task"])
    assert buffer.query_ids() == new
    assert [t.id for t in buffer.take(5)] == new


def test_samples_are_stamped_at_production_time_not_scoring_time(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    buffer = QueryBuffer(engine.store, engine.library.current_generation)
    ctx = CallContext(messages=[Message(role="user", content="produced under generation 0")])
    engine.before_call(ctx)  # the sample is produced under generation 0 ...
    engine.add_skills(_skill("be-concise"))  # ... the library changes before it is captured
    tid = engine.after_call(ctx, "answer")
    assert tid is not None
    engine.feedback(tid, 1.0)  # ... and before it is scored
    assert engine.flush(30)
    stored = engine.trajectories.get(tid)
    assert stored is not None and stored.generation == 0 and stored.reward == 1.0
    assert buffer.generation() == 1
    assert tid not in buffer.query_ids()
    assert buffer.sizes().support == 1


def test_consumed_samples_stay_out_after_a_restart(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    ids = capture_calls(engine, ["a", "b", "c"])
    buffer = QueryBuffer(engine.store, engine.library.current_generation)
    buffer.mark_consumed(buffer.take(2), step=1, backend="fake")
    engine.close()
    again = make_engine(settings)
    reopened = QueryBuffer(again.store, again.library.current_generation)
    assert reopened.query_ids() == ids[2:]
    sizes = reopened.sizes()
    assert (sizes.query, sizes.consumed, sizes.support) == (1, 2, 0)


def test_errored_calls_are_not_training_prompts(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    ok = capture_calls(engine, ["fine"])
    ctx = CallContext(messages=[Message(role="user", content="boom")])
    engine.before_call(ctx)
    engine.after_call(ctx, None, error="upstream 500")
    assert engine.flush(30)
    buffer = QueryBuffer(engine.store, engine.library.current_generation)
    assert buffer.query_ids() == ok
    assert buffer.sizes().unusable == 1


def test_train_status_shows_buffer_sizes(make_engine: Any, settings: Any, monkeypatch: Any) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["one", "two"])
    tid = capture_calls(engine, ["three"])[0]
    engine.feedback(tid, -1.0)
    assert engine.flush(30)
    engine.close()
    monkeypatch.setenv("METACLAW_HOME", str(settings.home))
    result = CliRunner().invoke(app, ["train", "status", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["buffer"]["query"] == 3
    assert data["buffer"]["rewarded_query"] == 1
    assert data["last_checkpoint"] is None
    text = CliRunner().invoke(app, ["train", "status"])
    assert "query buffer 3 (rewarded 1)" in text.output


def test_one_agents_generation_change_leaves_another_agents_buffer_untouched(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    lib_a, lib_b = engine.library_of("a"), engine.library_of("b")
    buf_a = QueryBuffer(engine.store, lib_a.current_generation, agent="a")
    buf_b = QueryBuffer(engine.store, lib_b.current_generation, agent="b")

    def calls(agent: str, texts: list[str]) -> list[str]:
        return capture_calls(engine, texts, agent=agent)

    a_old = calls("a", ["a first", "a second"])
    b_old = calls("b", ["b first", "b second", "b third"])
    assert (buf_a.query_ids(), buf_b.query_ids()) == (a_old, b_old)
    buf_b.mark_consumed(buf_b.take(1), step=1, backend="fake")
    lib_a.add(_skill("cite-sources"))  # agent a's generation 0 -> 1
    assert buf_a.generation() == 1 and buf_a.query_ids() == []
    assert buf_a.sizes().support == 2
    # b's generation did not move: its query data, and what it consumed, are as they were
    assert buf_b.generation() == 0
    assert buf_b.query_ids() == b_old[1:]
    sizes = buf_b.sizes()
    assert (sizes.query, sizes.consumed, sizes.support) == (2, 1, 0)
    a_new = calls("a", ["a third"])
    assert buf_a.query_ids() == a_new and a_new[0] not in buf_b.query_ids()
    stored = engine.trajectories.get(a_new[0])
    assert stored is not None and stored.generation == 1 and stored.agent == "a"
