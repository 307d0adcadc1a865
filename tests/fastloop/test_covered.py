"""The evolver is given the failures live skills do not cover yet, so it stops proposing the
same skill again (the offline bench's local evolver re-proposed one skill every day)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaclaw_core.evolve import SkillEvolver
from tests.fastloop.conftest import fail_call, fastloop_settings, skills_reply
from tests.support.scripted_openai import ScriptedOpenAI

ISO = {
    "name": "iso-timestamps-with-offset",
    "description": "Use when logging or scheduling a meeting time.",
    "body": "Write meeting times as ISO 8601 timestamps with the UTC offset.",
    "failures": [1],
}


def test_failures_a_new_skill_covers_are_not_shown_again_but_later_ones_are(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    engine = make_engine(fastloop_settings(tmp_path / "h", llm.base_url, evolver__max_failures=1))
    older = fail_call(engine, "Log when the Singapore standup meeting starts", "at 9:30")
    newer = fail_call(engine, "Log when the Tokyo review meeting starts", "at 14:00")
    assert engine.flush(10)
    llm.enqueue(skills_reply(ISO))
    first = SkillEvolver(engine).evolve()
    assert first.live == [ISO["name"]] and first.failures == [newer]

    # The older failure was never shown, but the skill just learned covers its task.
    again = SkillEvolver(engine).evolve()
    assert again.failures == [] and "1 covered by live skills" in again.message
    assert len(llm.chat_requests()) == 1  # the evolver LLM was not asked again

    # A failure made while the skill was live: the skill did not prevent it, so it is shown.
    later = fail_call(engine, "Log when the Berlin planning meeting starts", "at 10:00")
    assert engine.flush(10)
    llm.enqueue(skills_reply({**ISO, "name": "meeting-times-need-a-date"}))
    third = SkillEvolver(engine).evolve()
    assert third.failures == [later] and older not in third.failures
