"""The fast loop's triggers: N failures, a session ending with failures, and the observers
staying O(1) on the writer thread."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from metaclaw_core import MetaClaw
from tests.fastloop.conftest import ask, fail_call, fastloop_settings, skills_reply
from tests.support.scripted_openai import Reply, ScriptedOpenAI

ISO = {
    "name": "iso-timestamps-with-offset",
    "description": "Use when writing or logging a date or time.",
    "body": "Write timestamps in ISO 8601 with the UTC offset, e.g. 2026-11-30T09:30:00+08:00.",
}


def test_n_failures_trigger_an_evolution_in_the_background(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    settings = fastloop_settings(
        tmp_path / "h", llm.base_url, evolver__auto=True, evolver__failure_threshold=3
    )
    engine: MetaClaw = make_engine(settings)
    llm.enqueue(skills_reply(ISO))
    fail_call(engine, "Log when the Singapore standup starts", "9:30", error="ValueError: bad time")
    fail_call(engine, "Note the Tokyo review time", "2pm")  # reward -1 from the user
    assert engine.flush(10) and engine.fastloop.wait_idle(10)
    assert llm.chat_requests() == []  # two failures: below the threshold
    fail_call(engine, "Record the Berlin deploy time", "at noon", reward=0.0)  # <= 0 fails
    assert engine.flush(10) and engine.fastloop.wait_idle(20)
    assert len(llm.chat_requests()) == 1
    report = engine.fastloop.last_report
    assert report is not None and report.trigger == "3 failures" and len(report.failures) == 3
    assert ask(engine, "Log the Jakarta sync time").skill_names == ["iso-timestamps-with-offset"]
    assert engine.status()["fastloop"]["evolutions"] == 1


def test_a_session_that_ends_with_failures_triggers_an_evolution(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    settings = fastloop_settings(
        tmp_path / "h", llm.base_url, evolver__auto=True, evolver__failure_threshold=50
    )
    engine: MetaClaw = make_engine(settings)
    llm.enqueue(skills_reply(ISO))
    ok = fail_call(engine, "Say hello", "hello", reward=1.0, session_id="s1")
    bad = fail_call(engine, "Log the standup time", "9:30", session_id="s1")
    assert engine.flush(10) and engine.fastloop.wait_idle(10)
    assert llm.chat_requests() == []
    # what `POST /v1/sessions/s1/end` and OpenClaw's session_end do:
    engine.hook.metaclaw_session_ended(session_id="s1", reason="done", trajectory_ids=[ok, bad])
    assert engine.fastloop.wait_idle(20)
    report = engine.fastloop.last_report
    assert report is not None and report.trigger == "session end" and report.failures == [bad]
    assert engine.library.get("iso-timestamps-with-offset").provenance == [bad]


def test_observers_only_enqueue_while_the_llm_is_slow(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    settings = fastloop_settings(
        tmp_path / "h",
        llm.base_url,
        evolver__auto=True,
        evolver__failure_threshold=1,
        evolver__min_interval_s=60.0,
        judge__base_url=llm.base_url,
    )
    llm.default = Reply('{"skills": []}', delay_s=0.5)  # a slow evolver and judge
    engine: MetaClaw = make_engine(settings)
    writer_stats = engine.writer.stats if engine.writer else {}
    t0 = time.perf_counter()
    for i in range(20):
        fail_call(engine, f"task number {i}", "answer", error="boom", reward=None)
    took = time.perf_counter() - t0
    assert engine.flush(5)  # the writer is not held up by the slow LLM behind it
    assert took < 1.0, f"20 captures took {took:.2f}s"
    assert writer_stats["stored"] == 20
    engine.fastloop.close(timeout=5)


def test_each_agent_learns_from_its_own_failures_only(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    settings = fastloop_settings(
        tmp_path / "h", llm.base_url, evolver__auto=True, evolver__failure_threshold=2
    )
    engine: MetaClaw = make_engine(settings)
    llm.enqueue(skills_reply(ISO))
    a1 = fail_call(engine, "Log when the Singapore standup starts", "9:30", agent="planner")
    b1 = fail_call(engine, "Note the Tokyo review time", "2pm", agent="helper")
    assert engine.flush(10) and engine.fastloop.wait_idle(10)
    assert llm.chat_requests() == []  # one failure each: neither agent reached two
    a2 = fail_call(engine, "Record the Berlin deploy time", "at noon", agent="planner")
    assert engine.flush(10) and engine.fastloop.wait_idle(20)
    assert len(llm.chat_requests()) == 1
    prompt = llm.chat_requests()[0].body.decode()
    assert "Tokyo" not in prompt and "Singapore" in prompt  # only the planner's failures
    report = engine.fastloop.last_report
    assert report is not None and sorted(report.failures) == sorted([a1, a2])
    learned = engine.library_of("planner").get("iso-timestamps-with-offset")
    assert learned.agent == "planner" and not learned.shared
    assert engine.library_of("helper").live() == []
    task = "Log the Jakarta sync time"
    assert ask(engine, task, "planner").skill_names == ["iso-timestamps-with-offset"]
    for other in ("helper", None):  # never injected for another agent, however alike
        assert ask(engine, task, other).skill_names == []
    assert b1 not in report.failures
