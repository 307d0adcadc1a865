"""A library that stays small: corrections about the same rule become one skill, updated
with its evidence carried over; a different rule is a skill of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaclaw_core.evolve import SkillEvolver
from tests.fastloop.conftest import fail_call, fastloop_settings


def test_corrections_of_one_rule_consolidate_into_one_skill(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(fastloop_settings(tmp_path / "h", None, evolver__feedback_auto=False))
    first = fail_call(engine, "Log the standup time", "9:30", reward=None)
    engine.feedback(
        first, -1, source="correction", detail="Timestamps must be ISO 8601 with the +08:00 offset."
    )
    assert engine.flush(10)
    one = SkillEvolver(engine).from_corrections()
    (name,) = one.live
    assert "iso" in name and "8601" in name  # the name says the rule

    second = fail_call(engine, "Write down when the review starts", "at 14:00", reward=None)
    engine.feedback(
        second,
        -1,
        source="correction",
        detail="Write the time as ISO 8601 including the +08:00 UTC offset, not a bare local time.",
    )
    other = fail_call(engine, "File the login bug", "login broken", reward=None)
    engine.feedback(
        other, -1, source="correction", detail="Issue names must start with the P1/P2 priority tag."
    )
    assert engine.flush(10)
    two = SkillEvolver(engine).from_corrections()

    live = {s.name: s for s in engine.library.live()}
    assert len(live) == 2  # one skill per rule, not one per correction
    skill = live[name]
    assert skill.provenance == [first, second]  # the evidence carried over
    assert "not a bare local time" in skill.body and skill.body.startswith("Timestamps must")
    assert two.generation is not None and two.generation.updated == [name]
    (merged,) = [c for c in two.candidates if c.merged_into == name]
    assert any("consolidated into" in r for r in merged.reasons)
    (new,) = two.generation.added
    assert "priority" in new or "p1" in new
