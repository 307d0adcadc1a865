"""The randomised holdout: a new learned skill earns its place on its first N eligible calls."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from metaclaw_core import (
    CallContext,
    Message,
    MetaClaw,
    ModelOutput,
    ScoredSkill,
    Settings,
    Skill,
)
from metaclaw_core.holdout import HELD_OUT, INJECTED, draw, lift_of
from tests.support.engines import make_settings

NAME = "meeting-times-with-offset"
SKILL = Skill(
    name=NAME,
    description="Use when logging or scheduling a meeting time.",
    body="Write meeting times as ISO 8601 timestamps with the UTC offset.",
    source="evolver",
)
TASK = "Log the meeting time of the Berlin sync"


def holdout_settings(home: Path, calls: int = 10) -> Settings:
    s = make_settings(home)
    s.holdout.enabled = True
    s.holdout.calls = calls
    s.holdout.min_per_arm = 3
    s.holdout.flush_interval_s = 0.1
    s.holdout.seed = 7
    return s


def one_call(engine: MetaClaw, reward: Any) -> tuple[str, str | None]:
    """One eligible call; ``reward(arm)`` is its reward. Returns (trajectory id, arm)."""
    ctx = CallContext(messages=[Message(role="user", content=TASK)])
    inj = engine.before_call(ctx)
    arm = (inj.holdout or {}).get(NAME)
    assert (NAME in inj.skill_names) == (arm != HELD_OUT)
    tid = engine.after_call(ctx, ModelOutput(text="ok"))
    assert tid is not None
    engine.feedback(tid, reward(arm))
    return tid, arm


def wait_for(pred: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def state(engine: MetaClaw) -> dict[str, Any]:
    (row,) = engine.holdout.states(NAME)
    return row


def promote(engine: MetaClaw) -> None:
    """Calls where the skill helps (reward 1 injected, -1 held out) until it is promoted."""
    for _ in range(14):
        one_call(engine, lambda a: 1.0 if a == INJECTED else -1.0)
        if state(engine)["state"] != "holdout":
            break
    assert wait_for(lambda: state(engine)["state"] == "promoted")


def test_arms_are_drawn_at_random_but_deterministic_for_a_seed_and_recorded(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(holdout_settings(tmp_path / "h"))
    engine.add_skills(SKILL)
    arms = [one_call(engine, lambda a: 0.0) for _ in range(6)]
    expected = [INJECTED if draw(7, NAME, i) < 0.5 else HELD_OUT for i in range(6)]
    assert [a for _, a in arms] == expected
    assert {INJECTED, HELD_OUT} <= set(expected)  # both arms occur in six draws of seed 7
    assert engine.flush(10)
    tid, arm = arms[0]
    t = engine.trajectories.get(tid)
    assert t is not None and t.metadata["holdout"] == {NAME: arm}
    assert t.generation == engine.generation  # the generation stamp is unchanged
    # A skill you add yourself is not held out.
    engine.add_skills(
        Skill(name="mine", description="Use when logging a meeting.", body="Be brief.")
    )
    inj = engine.before_call(CallContext(messages=[Message(role="user", content=TASK)]))
    assert "mine" not in (inj.holdout or {})


TOPICS = [
    (
        "invoice-totals-in-cents",
        "Use when adding up invoice amounts.",
        "Sum amounts as integer cents.",
    ),
    (
        "sql-keywords-upper-case",
        "Use when writing SQL queries.",
        "Write SQL keywords in upper case.",
    ),
    (
        "commit-subject-imperative",
        "Use when writing a git commit message.",
        "Start the subject with a verb.",
    ),
    ("csv-header-row-first", "Use when exporting a table to CSV.", "Put one header row first."),
    ("recipe-metric-units", "Use when scaling a cooking recipe.", "Give weights in grams."),
    ("poem-line-count", "Use when asked for a short poem.", "Write eight lines, no more."),
]


def test_a_holdout_started_while_the_thread_rereads_the_store_keeps_its_count(
    make_engine: Any, tmp_path: Path
) -> None:
    # A re-read that began before a new holdout's state was written used to swap in counts
    # without it, so its first draws were made without a count (no arm) or drawn again.
    engine = make_engine(holdout_settings(tmp_path / "h", calls=1_000))
    h = engine.holdout
    done = threading.Event()

    def reread() -> None:
        while not done.is_set():
            h.reload()

    t = threading.Thread(target=reread)
    t.start()
    drawn: dict[str, int] = {}
    try:
        for name, description, body in TOPICS:
            skill = Skill(name=name, description=description, body=body, source="evolver")
            engine.add_skills(skill)
            found = [ScoredSkill(skill=skill, score=1.0)]
            for _ in range(3):
                _, arms = h.assign(found)
                drawn[name] = drawn.get(name, 0) + int(bool(arms and name in arms))
                time.sleep(0.01)
    finally:
        done.set()
        t.join()
    h.reload()
    assert drawn == {name: 3 for name, _, _ in TOPICS}
    assert h.status()["active"] == drawn


def test_a_neutral_skill_is_retired_by_the_holdout_after_n_calls(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(holdout_settings(tmp_path / "h", calls=12))
    engine.add_skills(SKILL)
    flip = iter([1.0, -1.0] * 20)
    for _ in range(12):  # the reward does not depend on the arm
        one_call(engine, lambda a: next(flip))
    # past N: the skill is injected, and no longer recorded as eligible
    _, arm = one_call(engine, lambda a: 1.0)
    assert arm is None
    assert wait_for(lambda: state(engine)["state"] != "holdout")
    row = state(engine)
    assert row["state"] == "retired"
    numbers = row["numbers"]
    assert numbers["eligible"] == 12 and numbers["injected"] + numbers["held_out"] == 12
    assert numbers["low"] <= 0 <= numbers["high"]
    assert NAME not in [s.name for s in engine.library.live()]
    gen = engine.library.history()[-1]
    assert gen.retired == [NAME] and gen.reason.startswith(f"holdout: retire {NAME} (no gain")
    assert "lift" in gen.reason and "held out" in gen.reason


def test_a_skill_that_helps_is_promoted_and_no_longer_held_out(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(holdout_settings(tmp_path / "h", calls=40))
    engine.add_skills(SKILL)
    promote(engine)
    row = state(engine)
    assert row["numbers"]["low"] > 0
    assert engine.library.history()[-1].reason.startswith(f"holdout: promote {NAME}")
    assert NAME in [s.name for s in engine.library.live()]
    for _ in range(5):  # promoted: injected on every call, nothing held out
        ctx = CallContext(messages=[Message(role="user", content=TASK)])
        inj = engine.before_call(ctx)
        assert NAME in inj.skill_names and not inj.holdout


def test_a_restart_in_the_middle_of_a_holdout_keeps_its_counts(
    make_engine: Any, tmp_path: Path
) -> None:
    settings = holdout_settings(tmp_path / "h", calls=10)
    first = make_engine(settings)
    first.add_skills(SKILL)
    before = [one_call(first, lambda a: 0.0)[1] for _ in range(4)]
    first.close()  # writes what is pending

    second = make_engine(holdout_settings(tmp_path / "h", calls=10))
    assert wait_for(lambda: second.holdout.status()["active"].get(NAME) == 4)
    after = [one_call(second, lambda a: 0.0)[1] for _ in range(3)]
    expected = [INJECTED if draw(7, NAME, i) < 0.5 else HELD_OUT for i in range(7)]
    assert before + after == expected  # the sequence continues where the store says
    assert second.flush(20)  # the three rewards are stored (the writer is asynchronous)
    second.holdout.step()
    inj, held, eligible = second.holdout.arms(NAME)
    assert eligible == 7 and len(inj) + len(held) == 7


def test_the_lift_interval_is_the_difference_of_the_arms_means() -> None:
    lift = lift_of([1.0, 1.0, 0.0, 1.0], [0.0, -1.0, 0.0, 0.0], 0.9, 8)
    assert lift.lift == 1.0
    assert lift.low is not None and lift.high is not None
    assert lift.low < 1.0 < lift.high and lift.low > 0
    assert lift_of([1.0], [], 0.9, 1).lift is None


def test_a_promotion_measured_long_ago_is_checked_again(make_engine: Any, tmp_path: Path) -> None:
    settings = holdout_settings(tmp_path / "h", calls=40)
    settings.holdout.recheck_after_generations = 2
    engine = make_engine(settings)
    engine.add_skills(SKILL)
    promote(engine)
    promoted_at = state(engine)["decided_generation"]
    for i in range(2):  # the library moves on
        engine.add_skills(
            Skill(name=f"other-{i}", description="Use for reports.", body="Be brief.")
        )
    engine.holdout.step()
    row = state(engine)
    assert row["state"] == "holdout" and row["started_generation"] == promoted_at + 2
    assert row["reason"].startswith(f"re-check: its lift was measured at generation {promoted_at}")
    assert engine.holdout.status()["active"][NAME] == 0  # a fresh count
    _, arm = one_call(engine, lambda a: 0.0)
    assert arm in (INJECTED, HELD_OUT)


def test_two_agents_with_a_skill_of_the_same_name_have_separate_holdouts(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(holdout_settings(tmp_path / "h", calls=40))
    engine.library_of("alpha").add(SKILL)
    engine.library_of("beta").add(SKILL)

    def call(agent: str, reward: Any) -> str | None:
        ctx = CallContext(messages=[Message(role="user", content=TASK)], agent=agent)
        inj = engine.before_call(ctx)
        arm = (inj.holdout or {}).get(NAME)
        tid = engine.after_call(ctx, ModelOutput(text="ok"))
        assert tid is not None
        engine.feedback(tid, reward(arm))
        return arm

    # alpha's skill helps its calls; beta's is never rewarded for being injected
    arms_a = [call("alpha", lambda a: 1.0 if a == INJECTED else -1.0) for _ in range(14)]
    arms_b = [call("beta", lambda a: -1.0 if a == INJECTED else 1.0) for _ in range(3)]
    # each agent's draws are its own sequence (alpha's 14 calls did not advance beta's)
    assert arms_b == [INJECTED if draw(7, f"beta/{NAME}", i) < 0.5 else HELD_OUT for i in range(3)]
    assert arms_a[:3] == [
        INJECTED if draw(7, f"alpha/{NAME}", i) < 0.5 else HELD_OUT for i in range(3)
    ]
    assert wait_for(lambda: engine.holdout.states(NAME, agent="alpha")[0]["state"] == "promoted")
    (beta,) = engine.holdout.states(NAME, agent="beta")
    assert beta["state"] == "holdout"  # its own numbers: not decided by alpha's
    assert engine.holdout.states(NAME) == []  # the default agent has no such holdout
    promoted = engine.library_of("alpha").history()[-1]
    assert promoted.agent == "alpha" and promoted.reason.startswith(f"holdout: promote {NAME}")
    assert [g.agent for g in engine.library_of("beta").history()] == ["beta"]
    assert engine.flush(10)
    from metaclaw_core.evolve.evidence import skill_evidence

    (ev,) = skill_evidence(engine, NAME, agent="alpha")
    assert ev["holdout"]["state"] == "promoted"
    (ev_b,) = skill_evidence(engine, NAME, agent="beta")
    assert ev_b["holdout"]["state"] == "holdout" and ev_b["holdout"]["eligible"] == 3


def test_a_promotion_whose_failures_others_have_since_fixed_is_checked_again(
    make_engine: Any, tmp_path: Path
) -> None:
    from metaclaw_core.evolve.report import Replay
    from metaclaw_core.evolve.validation import ReplayValidator

    engine = make_engine(holdout_settings(tmp_path / "h", calls=40))
    failures = ["traj-berlin", "traj-tokyo"]
    engine.add_skills(SKILL.model_copy(update={"provenance": failures}))
    promote(engine)
    log = ReplayValidator(engine)
    # Another skill's replays fix one of the two failures: the evidence still stands.
    log._record("evo-1", [Replay("iso-everywhere", "failure", failures[0], "fixed")])
    engine.add_skills(Skill(name="iso-everywhere", description="Use for times.", body="ISO."))
    engine.holdout.step()
    assert state(engine)["state"] == "promoted"
    # ...and then the other one too (a not-fixed replay of a third skill changes nothing).
    log._record(
        "evo-2",
        [
            Replay("offsets-rule", "failure", failures[1], "fixed"),
            Replay("brevity", "failure", failures[0], "not-fixed"),
        ],
    )
    engine.add_skills(Skill(name="offsets-rule", description="Use for zones.", body="Offsets."))
    engine.holdout.step()
    row = state(engine)
    assert row["state"] == "holdout", row
    assert row["reason"].startswith("re-check: every failure it was distilled from was since")
    assert "iso-everywhere, offsets-rule" in row["reason"]
    assert engine.holdout.status()["active"][NAME] == 0
