import itertools
from typing import Any

import numpy as np
import pytest

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


def test_query_skips_a_hosts_continue_prompt_after_a_retried_error() -> None:
    from metaclaw_core.config import Settings
    from metaclaw_core.plugins.query import metaclaw_extract_query

    resume = (
        "[Mon 2026-11-30 10:55 UTC] Continue the current task from the existing transcript, "
        "preserving completed work. Do not restart the task or repeat completed actions."
    )
    c = CallContext(
        messages=[
            Message(role="user", content="Rename the report to the P2 convention"),
            Message(role="assistant", content=""),
            Message(role="user", content=resume),
        ]
    )
    assert metaclaw_extract_query(ctx=c, settings=Settings()) == (
        "Rename the report to the P2 convention"
    )
    as_task = CallContext(task=resume, messages=c.messages[:1])  # how the OpenClaw plugin asks
    assert metaclaw_extract_query(ctx=as_task, settings=Settings()) == (
        "Rename the report to the P2 convention"
    )
    alone = CallContext(task=resume)
    assert metaclaw_extract_query(ctx=alone, settings=Settings()).startswith("Continue the")


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors in a few tight clusters: many scores lie within float16 error of each
    other, so the candidate margin and the float32 re-scoring both matter."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, dim))
    vecs = centres[rng.integers(0, 8, size=n)] + 0.02 * rng.normal(size=(n, dim))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(np.float32)


@pytest.mark.parametrize("n", [300, 3000])  # matmul below SMALL_PRODUCT, einsum above
def test_ranking_is_the_brute_force_float32_ranking(n: int) -> None:
    from metaclaw_core.skills.index import SMALL_PRODUCT

    dim = 384
    vecs = _clustered(n, dim, seed=1)
    skills = [Skill.model_construct(name=f"s{i:05d}", description="d", body="b") for i in range(n)]
    snap = SkillSnapshot.build(1, skills, vecs)
    assert (snap.matrix.size <= SMALL_PRODUCT) == (n == 300)
    rng = np.random.default_rng(2)
    queries = [vecs[i] for i in rng.integers(0, n, size=10)]  # queries inside the clusters
    queries += [q / np.linalg.norm(q) for q in rng.normal(size=(10, dim)).astype(np.float32)]
    for q in queries:
        brute = (vecs.astype(np.float64) @ q.astype(np.float64)).astype(np.float32)
        assert np.abs(snap.scores(q) - brute).max() < 1e-5
        for k, floor in ((1, -1.0), (5, -1.0), (50, -1.0), (5, 0.9), (5, 2.0)):
            got = snap.top_k(q, k, floor)
            exact = snap.scores(q)
            order = sorted(range(n), key=lambda i: (-float(exact[i]), f"s{i:05d}"))
            want = [f"s{i:05d}" for i in order if exact[i] >= floor][:k]
            assert [s.skill.name for s in got] == want
            assert [s.score for s in got] == [float(exact[int(w[1:])]) for w in want]


def test_ties_break_by_name_and_answers_are_remembered_per_snapshot() -> None:
    vecs = np.tile(np.eye(4, dtype=np.float32)[:1], (6, 1))  # six identical rows
    names = ["f", "b", "e", "a", "d", "c"]
    skills = [Skill(name=x, description="d", body="b") for x in names]
    snap = SkillSnapshot.build(1, skills, vecs)
    q = np.eye(4, dtype=np.float32)[0]
    first = snap.top_k(q, 3, -1.0)
    assert [s.skill.name for s in first] == ["a", "b", "c"]
    again = snap.top_k(q.copy(), 3, -1.0)  # an equal vector, not the same object
    assert again == first and again is not first
    again.clear()  # the caller's list is its own
    assert [s.skill.name for s in snap.top_k(q, 3, -1.0)] == ["a", "b", "c"]
    assert [s.skill.name for s in snap.top_k(q, 2, -1.0)] == ["a", "b"]  # k is in the key
    assert snap.top_k(q, 3, 1.5) == []  # and so is the floor


def test_remembered_answers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from metaclaw_core.skills import index

    monkeypatch.setattr(index, "RESULT_CACHE", 3)
    vecs = np.eye(8, dtype=np.float32)
    snap = SkillSnapshot.build(
        1, [Skill(name=f"s{i}", description="d", body="b") for i in range(8)], vecs
    )
    for i in range(8):
        assert [s.skill.name for s in snap.top_k(vecs[i], 1, -1.0)] == [f"s{i}"]
    assert len(snap._results) == 3
    assert [s.skill.name for s in snap.top_k(vecs[0], 1, -1.0)] == ["s0"]  # recomputed
