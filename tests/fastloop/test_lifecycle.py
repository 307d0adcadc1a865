"""Skill effectiveness: injected vs comparable calls without the skill, and retirement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaclaw_core import CallContext, Message, MetaClaw, ModelOutput, Skill
from metaclaw_core.evolve import retire_unhelpful, skill_stats
from tests.fastloop.conftest import fastloop_settings

SKILLS = [
    Skill(
        name="iso-timestamps",
        description="Use when writing, logging or scheduling a date or time.",
        body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
    ),
    Skill(
        name="sql-safety",
        description="Use when writing SQL queries.",
        body="Use bound parameters; never build SQL by string concatenation.",
    ),
]


def call(engine: MetaClaw, task: str, reward: float, *, inject: bool = True) -> None:
    ctx = CallContext(
        messages=[Message(role="user", content=task)],
        metadata={} if inject else {"top_k": 0},  # top_k 0: same task, nothing injected
    )
    engine.before_call(ctx)
    tid = engine.after_call(ctx, ModelOutput(text="ok"))
    assert tid is not None
    engine.feedback(tid, reward)


def test_stats_compare_injected_calls_with_comparable_ones_and_retire_losers(
    make_engine: Any, tmp_path: Path
) -> None:
    settings = fastloop_settings(tmp_path / "h", None, lifecycle__min_samples=3)
    engine: MetaClaw = make_engine(settings)
    engine.add_skills(SKILLS)
    for i in range(3):
        # with the timestamp skill the calls did worse than the same tasks without it
        call(engine, f"Write the date and time of meeting {i} in the log", -1.0)
        call(engine, f"Write the date and time of review {i} in the log", 1.0, inject=False)
        call(engine, f"Write a SQL query for report {i}", 1.0)  # with the SQL skill: fine
    call(engine, "Write a SQL query for the audit", 0.0, inject=False)
    assert engine.flush(10)

    stats = {s.name: s for s in skill_stats(engine)}
    iso, sql = stats["iso-timestamps"], stats["sql-safety"]
    assert (iso.injected, iso.rewarded_with, iso.mean_with) == (3, 3, -1.0)
    assert iso.comparable_without == 3 and iso.mean_without == 1.0
    assert iso.gain == -2.0 and iso.verdict == "does-not-help"
    assert (sql.injected, sql.mean_with, sql.comparable_without) == (3, 1.0, 1)
    assert sql.verdict == "too-few-samples"  # one comparable call is not enough to judge

    gen = retire_unhelpful(engine)
    assert gen is not None and gen.retired == ["iso-timestamps"]
    assert gen.reason == "lifecycle: no gain from iso-timestamps (gain -2.00)"
    assert [s.name for s in engine.library.live()] == ["sql-safety"]
    assert retire_unhelpful(engine) is None
