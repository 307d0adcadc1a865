"""Several agents on one store: own skills, shared skills, per-agent generations, migration."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, MetaClaw, Skill
from metaclaw_core.agents import DEFAULT_AGENT, validate_agent
from metaclaw_core.errors import ConfigError, StoreError
from tests.support.engines import make_settings

OLD_STORE = Path(__file__).parent.parent / "data" / "store_before_agents"


def ctx(text: str, agent: str | None = None) -> CallContext:
    return CallContext(messages=[Message(role="user", content=text)], agent=agent)


def injected(engine: MetaClaw, text: str, agent: str | None = None) -> list[str]:
    return engine.before_call(ctx(text, agent)).skill_names


CITE = Skill(
    name="cite-sources",
    description="When answering factual questions about history",
    body="Cite the source of every historical fact you state.",
)
REFUND = Skill(
    name="refund-policy",
    description="When a customer asks for a refund of an order",
    body="Check the order date first: refunds are possible within 30 days.",
)


def test_agent_ids_are_validated() -> None:
    assert validate_agent(None) == DEFAULT_AGENT
    assert validate_agent("Support") == "support"
    assert validate_agent("coder.v2_a-1") == "coder.v2_a-1"
    for bad in ["-x", "a b", "x" * 65, "ä", "../etc"]:
        with pytest.raises(ConfigError, match="not an agent id"):
            validate_agent(bad)
    with pytest.raises(ValueError, match="not an agent id"):
        CallContext(agent="no spaces")


def test_an_agents_skill_is_never_injected_for_another(make_engine: Any, tmp_path: Path) -> None:
    engine = make_engine(make_settings(tmp_path / "h"))
    engine.library_of("support").add(REFUND)
    engine.library_of("coder").add(CITE)
    text = "A customer asks for a refund of the order they placed"
    assert injected(engine, text, "support") == ["refund-policy"]
    # the coder agent's texts may look alike; it never gets the support agent's skill
    assert "refund-policy" not in injected(engine, text, "coder")
    assert injected(engine, text) == []  # the default agent has none
    hist = "Who won the battle of Hastings? Cite facts about history"
    assert injected(engine, hist, "coder") == ["cite-sources"]
    assert injected(engine, hist, "support") == []
    block = engine.before_call(ctx(text, "support")).text
    assert "coder" not in block and "agent" not in block  # the block names no other agent
    import asyncio

    fresh = "Someone wants a refund for an order they placed last week"  # not in the LRU yet
    assert asyncio.run(engine.abefore_call(ctx(fresh, "support"))).skill_names == ["refund-policy"]
    assert asyncio.run(engine.abefore_call(ctx(fresh, "coder"))).skill_names == []


def test_a_shared_skill_reaches_every_agent_and_groups_limit_it(
    make_engine: Any, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path / "h")
    settings.agents.groups = {"helpdesk": ["support", "billing"]}
    engine = make_engine(settings)
    coder = engine.library_of("coder")
    coder.add(CITE)
    coder.add(REFUND)
    hist = "Who won the battle of Hastings? Cite facts about history"
    refund = "A customer asks for a refund of the order they placed"
    before = {a: engine.library_of(a).current_generation() for a in ("support", "billing")}
    gen = coder.share("cite-sources")
    assert gen.agent == "coder" and gen.shared_with == []
    for agent in ("support", "billing", "default", "coder"):
        assert injected(engine, hist, agent) == ["cite-sources"], agent
        assert engine.library_of(agent).current_generation() == gen.number
    assert before == {"support": 0, "billing": 0}  # the coder's own changes were not theirs
    gen2 = coder.share("refund-policy", groups=["helpdesk"])
    assert gen2.shared_with == ["helpdesk"]
    assert injected(engine, refund, "support") == ["refund-policy"]
    assert injected(engine, refund, "billing") == ["refund-policy"]
    assert injected(engine, refund, "default") == []
    assert engine.library_of("default").current_generation() == gen.number  # not reached
    assert [s.name for s in engine.library_of("support").received()] == [
        "cite-sources",
        "refund-policy",
    ]
    assert engine.library_of("support").live() == []  # received, not owned
    with pytest.raises(StoreError, match="no agent group"):
        coder.share("cite-sources", groups=["nobody"])
    # the owner retiring it takes it from everyone: a generation of every receiver
    gen3 = coder.retire("cite-sources")
    assert gen3.shared_with == []
    assert injected(engine, hist, "support") == []
    assert engine.library_of("default").current_generation() == gen3.number


def test_a_change_to_one_agent_is_not_a_generation_of_another(
    make_engine: Any, tmp_path: Path
) -> None:
    engine = make_engine(make_settings(tmp_path / "h"))
    a, b = engine.library_of("a"), engine.library_of("b")
    ga = a.add(CITE)
    gb = b.add(REFUND)
    assert (ga.number, gb.number) == (1, 2)  # one store-wide sequence of numbers
    for _ in range(3):
        a.update(CITE.model_copy(update={"body": f"{CITE.body} Again {_}."}))
    assert b.current_generation() == gb.number
    assert a.current_generation() == 5
    assert [g.number for g in b.history()] == [2]
    assert engine.snapshot_for("b").generation == gb.number
    assert engine.snapshot_for("a").generation == 5
    # names are per agent: both may own a skill of the same name
    b.add(CITE.model_copy(update={"body": "B's own way to cite."}))
    assert a.get("cite-sources").body != b.get("cite-sources").body
    assert {s.agent for s in a.live()} == {"a"} and {s.agent for s in b.live()} == {"b"}


def test_trajectories_carry_their_agent(make_engine: Any, tmp_path: Path) -> None:
    engine = make_engine(make_settings(tmp_path / "h"))
    c1 = ctx("hello from support", "support")
    engine.before_call(c1)
    t1 = engine.after_call(c1, "hi")
    c2 = ctx("hello from default")
    engine.before_call(c2)
    t2 = engine.after_call(c2, "hi")
    assert engine.flush(10)
    got1, got2 = engine.trajectories.get(t1), engine.trajectories.get(t2)
    assert got1 is not None and got2 is not None
    assert (got1.agent, got2.agent) == ("support", "default")
    assert [t.id for t in engine.trajectories.recent(agent="support")] == [t1]
    assert [t.id for t in engine.trajectories.recent(agent="default")] == [t2]
    assert engine.trajectories.agents() == {"support": 1, "default": 1}


def test_an_engine_for_one_agent(make_engine: Any, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "h", agents__default="support")
    engine = make_engine(settings)
    assert engine.agent == "support"
    engine.add_skills(REFUND)
    assert engine.library_of("default").live() == []
    refund = "A customer asks for a refund of the order they placed"
    assert injected(engine, refund) == ["refund-policy"]
    assert injected(engine, refund, "default") == []


def test_a_store_written_before_agents_opens_and_migrates(make_engine: Any, tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    shutil.copytree(OLD_STORE / "db", home / "db")
    engine = make_engine(make_settings(home))
    lib = engine.library
    assert lib.current_generation() == 4
    assert [s.name for s in lib.live()] == ["cite-sources", "retry-timeouts"]
    assert all(s.agent == "default" and not s.shared for s in lib.live())
    assert [g.number for g in lib.history()] == [1, 2, 3, 4]
    assert all(g.agent == "default" for g in lib.history())
    assert [s.name for s in lib.pending()] == ["waiting-rule"]
    assert injected(engine, "Please cite facts when answering factual questions") == [
        "cite-sources"
    ]
    assert engine.library_of("other").live() == []
    old = engine.trajectories.recent(limit=10)
    assert len(old) == 3 and {t.agent for t in old} == {"default"}
    assert len(engine.trajectories.recent(agent="default")) == 3
    assert engine.trajectories.recent(agent="other") == []
    rewarded = [t for t in old if t.rewards]
    assert len(rewarded) == 1 and rewarded[0].rewards[0].agent == "default"
    # new writes go on in the migrated tables, old and new rows side by side
    c = ctx("a new call", "other")
    engine.before_call(c)
    tid = engine.after_call(c, "ok")
    assert engine.flush(10)
    assert [t.id for t in engine.trajectories.recent(agent="other")] == [tid]
    gen = engine.library_of("other").add(REFUND)
    assert gen.number == 5 and lib.current_generation() == 4
    engine.feedback(tid, 0.5)
    assert engine.flush(10)
    assert engine.trajectories.count() == 4


def test_evolutions_name_their_agent_and_old_rows_are_the_defaults(
    make_engine: Any, tmp_path: Path
) -> None:
    import pyarrow as pa

    from metaclaw_core.evolve.record import EVOLUTIONS, EvolutionLog, evolutions_schema
    from metaclaw_core.models import utcnow

    engine = make_engine(make_settings(tmp_path / "h"))
    old_schema = pa.schema([f for f in evolutions_schema() if f.name != "agent"])
    row = {
        "id": "before-agents", "created_at": utcnow(), "mode": "evolve", "trigger": "manual",
        "failure_ids": ["t0"], "correction_keys": [], "generation": 1, "live": ["x"],
        "pending": [], "rejected": [], "model": "m", "report_json": "{}",
    }  # fmt: skip
    from metaclaw_core.store.db import Store

    # a table written before agents (by another process: this one opens it afresh)
    table = Store(engine.settings).table(EVOLUTIONS, old_schema)
    table.add(pa.Table.from_pylist([row], schema=old_schema))

    log = EvolutionLog(engine.store)
    for i, agent in enumerate(["a", "b", "a"]):
        fields = {k: v for k, v in row.items() if k not in ("id", "created_at", "report_json")}
        log.append(id=f"evo-{i}", created_at=utcnow(), agent=agent, report={}, **fields)
    assert [r["id"] for r in log.recent(agent="a")] == ["evo-2", "evo-0"]
    assert [r["id"] for r in log.recent(agent="b")] == ["evo-1"]
    assert [r["id"] for r in log.recent(agent=DEFAULT_AGENT)] == ["before-agents"]
    assert len(log.recent()) == 4
