import itertools
from typing import Any

import numpy as np

from metaclaw_core import CallContext, Message, MetaClaw, ScoredSkill, Skill
from metaclaw_core.plugins.query import clean_task_text
from metaclaw_core.plugins.render import BLOCK_START, render_block, strip_injection
from metaclaw_core.skills.index import SkillSnapshot

SKILLS = [
    Skill(
        name="iso-timestamps",
        description="When writing or logging dates and times",
        body="Write timestamps in ISO 8601 with an explicit offset.",
    ),
    Skill(
        name="confirm-deletes",
        description="When deleting or overwriting files",
        body="List what will be deleted and ask for confirmation first.",
    ),
    Skill(
        name="sql-safety",
        description="When writing SQL queries",
        body="Use parameterised queries; never build SQL by string concatenation.",
    ),
]


def ctx(text: str, system: str = "You are helpful.") -> CallContext:
    return CallContext(
        messages=[Message(role="system", content=system), Message(role="user", content=text)]
    )


def test_top_k_over_the_matrix_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(500, 16)).astype(np.float32)
    skills = [Skill(name=f"s{i}", description="d", body="b") for i in range(500)]
    snap = SkillSnapshot.build(3, skills, list(vecs))
    q = rng.normal(size=16).astype(np.float32)
    q /= np.linalg.norm(q)
    got = snap.top_k(q, 5, -1.0)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    want = np.argsort(-(unit @ q))[:5]
    assert [s.skill.name for s in got] == [f"s{i}" for i in want]
    assert all(a.score >= b.score for a, b in itertools.pairwise(got))
    assert snap.top_k(q, 5, 2.0) == []  # nothing reaches an impossible floor


def test_relevant_skill_is_injected_and_irrelevant_call_gets_nothing(engine: MetaClaw) -> None:
    engine.add_skills(SKILLS)
    inj = engine.before_call(ctx("Log the standup at 9:30 tomorrow in the journal"))
    assert inj.skill_names[0] == "iso-timestamps"
    assert "ISO 8601" in inj.text and inj.generation == 1
    assert engine.before_call(ctx("hi!")).skill_names == []


def test_query_ignores_openclaw_envelope_and_earlier_injections() -> None:
    raw = (
        "[Mon 2026-11-30 02:55 UTC] Delete the temp files in build/\n"
        "Runtime: agent=main | session=abc123 | channel=cli"
    )
    assert clean_task_text(raw, 2000) == "Delete the temp files in build/"
    block = render_block([ScoredSkill(skill=SKILLS[0], score=0.5)])
    assert clean_task_text(f"{block}\nWrite SQL", 2000) == "Write SQL"
    assert BLOCK_START not in strip_injection(f"sys\n\n{block}")


def test_envelope_does_not_change_what_is_retrieved(engine: MetaClaw) -> None:
    engine.add_skills(SKILLS)
    plain = engine.before_call(ctx("Delete the temp files in build/"))
    wrapped = engine.before_call(
        ctx(
            "[Tue 2026-12-01 08:00 UTC] Delete the temp files in build/\n"
            "Runtime: agent=x | session=y"
        )
    )
    assert plain.skill_names == wrapped.skill_names == ["confirm-deletes"]
    assert wrapped.text == plain.text


def test_rendering_is_deterministic_and_replaces_an_earlier_block(engine: MetaClaw) -> None:
    a, b = ScoredSkill(skill=SKILLS[0], score=0.9), ScoredSkill(skill=SKILLS[2], score=0.3)
    assert render_block([a, b]) == render_block([b, a])
    engine.add_skills(SKILLS)
    inj = engine.before_call(ctx("Write the SQL query that logs the time of each order"))
    once = inj.apply_to_system("You are helpful.")
    twice = inj.apply_to_system(once)
    assert once == twice and once.startswith("You are helpful.\n\n<metaclaw-skills>")
    assert once.count(BLOCK_START) == 1


def test_token_budget_bounds_the_block(make_engine: Any, settings: Any) -> None:
    settings.retrieval.token_budget = 60
    settings.retrieval.min_similarity = -1.0
    engine = make_engine(settings)
    engine.add_skills(SKILLS)
    inj = engine.before_call(ctx("Log the time of the SQL delete"))
    assert len(inj.skills) == 1  # one skill (~30 tokens) + heading fit; two do not
    assert len(inj.text) // 4 <= 60 + 10


def test_generation_change_swaps_the_snapshot_by_reference(engine: MetaClaw) -> None:
    engine.add_skills(SKILLS[:1])
    old = engine.snapshot
    engine.add_skills(SKILLS[1:])
    new = engine.snapshot
    assert new is not old
    assert (old.generation, len(old)) == (1, 1) and (new.generation, len(new)) == (2, 3)
    assert not old.matrix.flags.writeable  # readers can hold it safely


def test_query_skips_a_host_context_message_after_the_users_words() -> None:
    from metaclaw_core.config import Settings
    from metaclaw_core.plugins.query import metaclaw_extract_query

    c = CallContext(
        messages=[
            Message(role="user", content="Delete the temp files in build/"),
            Message(role="user", content="<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstate dump"),
        ]
    )
    assert metaclaw_extract_query(ctx=c, settings=Settings()) == "Delete the temp files in build/"
