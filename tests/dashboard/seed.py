"""Seeded data for the dashboard tests, made through the real engine: hand-written skills, a
skill the evolver (on a scripted LLM) distilled from failures, a retirement, a candidate
waiting for review, trajectories with injected skills and rewards, and training checkpoints.

Generations after seeding: 1 (three manual skills), 2 (the evolved skill), 3 (a retirement).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from metaclaw_core import CallContext, Message, MetaClaw, ModelOutput, Settings, Skill
from metaclaw_core.train.checkpoints import CheckpointLog
from tests.support.engines import make_settings
from tests.support.scripted_openai import Reply, ScriptedOpenAI

MANUAL_SKILLS = [
    Skill(
        name="iso-timestamps",
        description="Use when writing, logging or scheduling a date or time.",
        body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
        category="time",
    ),
    Skill(
        name="cite-sources",
        description="Use when answering from documents, manuals or web pages.",
        body="Name the document each fact came from, with the section.",
        category="research",
    ),
    Skill(
        name="metric-units",
        description="Use when giving distances, weights or temperatures.",
        body="Give metric units first and imperial ones in brackets.",
    ),
]
EVOLVED = {
    "name": "back-up-before-overwriting",
    "description": "Use when a task deletes, moves or overwrites files or folders.",
    "body": "Before deleting or overwriting anything, list what will change and keep a backup "
    "copy of every file you replace.",
    "category": "files",
}
CANDIDATE = {
    "name": "summarise-long-threads",
    "description": "Use when asked to summarise a long email thread or chat log.",
    "body": "Open with three bullets of decisions made, then list the open questions with "
    "their owners.",
    "category": "writing",
}
RETIRED = "metric-units"
# Untrusted text as a trajectory can carry it: the page must show it, never run it.
HOSTILE_TASK = (
    'Render the weekly report <img src=x onerror="window.__xss=1">'
    "<script>window.__xss=2</script> as a table"
)


@dataclass
class Seeded:
    engine: MetaClaw
    generation: int
    live: list[str]
    evolved: str
    candidate: str
    retired: str
    evolved_from: list[str] = field(default_factory=list)  # its provenance (failure ids)
    hostile_task: str = HOSTILE_TASK


def dashboard_settings(home: Path, llm: ScriptedOpenAI) -> Settings:
    """Test settings with the evolver on the scripted server (never triggered on its own)."""
    s = make_settings(home)
    s.evolver.base_url = llm.base_url
    s.evolver.model = "scripted-evolver"
    s.evolver.api_key = SecretStr("sk-test-dashboard-evolver-0123456789")
    s.evolver.auto = False
    s.evolver.max_retries = 0
    s.evolver.timeout_s = 5.0
    s.holdout.enabled = True  # the evolved skill starts its holdout: the evidence panel
    return s


def call(
    engine: MetaClaw,
    task: str,
    answer: str,
    *,
    reward: float | None = None,
    error: str | None = None,
    session_id: str = "demo-session",
) -> str:
    """One captured call through before_call/after_call, rated when ``reward`` is given."""
    ctx = CallContext(
        messages=[
            Message(role="system", content="You are a careful assistant."),
            Message(role="user", content=task),
        ],
        session_id=session_id,
        framework="python",
    )
    engine.before_call(ctx)
    tid = engine.after_call(ctx, ModelOutput(text=answer), error=error)
    assert tid is not None
    if reward is not None:
        engine.feedback(tid, reward, detail=None if reward > 0 else "not what I asked for")
    return tid


def _evolver_reply(skill: dict[str, str]) -> Reply:
    return Reply(json.dumps({"skills": [{**skill, "updates": None, "failures": [1, 2]}]}))


def seed(engine: MetaClaw, llm: ScriptedOpenAI) -> Seeded:
    engine.add_skills(list(MANUAL_SKILLS), reason="seed: hand-written skills")
    call(engine, "Log the design review at 9:30 tomorrow", "2026-12-01T09:30:00+00:00", reward=1)
    call(engine, "Schedule the backup for 02:00 on Sunday", "Sunday 02:00 UTC", reward=0.5)
    call(engine, "What does the handbook say about parental leave?", "Sixteen weeks.", reward=1)
    call(engine, "How far is it from Paris to Berlin?", "About 1050 km.", reward=-0.5)
    failed = [
        call(
            engine,
            "Delete the old build folders under /srv/builds",
            "Removed /srv/builds and /srv/data.",
            error="the agent deleted /srv/data without asking",
            session_id="ops",
        ),
        call(
            engine,
            "Overwrite config.yaml with the new settings",
            "Done, config.yaml replaced.",
            reward=-1,
            session_id="ops",
        ),
    ]
    assert engine.flush(30)
    evolver = engine.fastloop.evolver
    llm.enqueue(_evolver_reply(EVOLVED))
    report = evolver.evolve(trigger="2 failures", prefer=failed)
    assert report.live == [EVOLVED["name"]], report.to_json()
    engine.library.retire([RETIRED], reason=f"lifecycle: no gain from {RETIRED} (gain -0.50)")

    call(engine, "Move the logs folder to the archive disk", "Moved, old copy kept.", reward=1)
    call(engine, HOSTILE_TASK, "| week | total |", reward=1, session_id="reports")
    more = [
        call(engine, "Summarise this 200-message email thread", "It was long.", reward=-1),
        call(engine, "Give me the gist of the #ops chat log", "People talked.", reward=-0.5),
    ]
    assert engine.flush(30)
    llm.enqueue(_evolver_reply(CANDIDATE))
    report = evolver.evolve(trigger="session end", prefer=more, review="manual")
    assert report.pending == [CANDIDATE["name"]], report.to_json()

    log = CheckpointLog(engine.store)
    for step, reward in [(1, -0.4), (2, -0.1), (3, 0.2), (4, 0.35), (5, 0.6)]:
        log.record(
            backend="fake",
            model="fake-model",
            kind="sampler",
            name=f"sampler-{step:06d}",
            path=f"fake://sampler-{step:06d}",
            step=step,
            generation=3,
            reward=reward,
        )
    assert engine.flush(30)
    evolved = engine.library.get(EVOLVED["name"])
    return Seeded(
        engine=engine,
        generation=engine.library.current_generation(),
        live=[s.name for s in engine.library.live()],
        evolved=EVOLVED["name"],
        candidate=CANDIDATE["name"],
        retired=RETIRED,
        evolved_from=list(evolved.provenance),
    )
