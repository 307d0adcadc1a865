"""The extension surface: built-ins are plugins, and a plugin replaces or extends them."""

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import (
    CallContext,
    ConfigError,
    Message,
    MetaClaw,
    ScoredSkill,
    Skill,
    Trajectory,
    hookimpl,
)
from metaclaw_core.hookspecs import hook_names
from tests.support.engines import SharedEmbedder, make_settings

PINNED = Skill(name="always-be-kind", description="Kindness", body="Be kind.")


class PinnedRetrieval:
    """Replaces retrieval: always inject one fixed skill."""

    @hookimpl
    def metaclaw_retrieve(self, query: str, snapshot: Any, **kw: Any) -> list[ScoredSkill]:
        return [ScoredSkill(skill=PINNED, score=1.0)]


class TicketRedactor:
    """Extends pre-store processing: hide ticket numbers, drop health checks."""

    @hookimpl
    def metaclaw_prepare_trajectory(self, trajectory: Trajectory, settings: Any) -> bool | None:
        if trajectory.query == "ping":
            return False
        for m in trajectory.messages:
            m.content = m.content.replace("TICKET-4711", "TICKET-****")
        return None


def test_builtins_are_registered_as_plugins(engine: MetaClaw) -> None:
    names = {engine.pm.get_name(p) for p in engine.pm.get_plugins()}
    assert {"builtin:query", "builtin:retrieval", "builtin:render", "builtin:redact"} <= names
    assert set(hook_names()) <= {h for h in dir(engine.pm.hook) if h.startswith("metaclaw_")}


def test_plugin_replaces_retrieval(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings, plugins=[PinnedRetrieval()])
    inj = engine.before_call(
        CallContext(messages=[Message(role="user", content="anything at all")])
    )
    assert inj.skill_names == ["always-be-kind"] and "Be kind." in inj.text


def test_plugin_redacts_and_filters_trajectories(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings, plugins=[TicketRedactor()])
    tid = engine.after_call(
        CallContext(messages=[Message(role="user", content="Close TICKET-4711 please")]), "done"
    )
    dropped = engine.after_call(
        CallContext(messages=[Message(role="user", content="ping")]), "pong"
    )
    assert dropped is None
    engine.flush()
    t = engine.trajectories.get(tid or "")
    assert t is not None and t.messages[0].content == "Close TICKET-**** please"
    assert engine.trajectories.count() == 1


def test_third_party_plugin_loads_from_the_entry_point_group(
    minilm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "pinned_plugin.py").parent.mkdir(parents=True)
    (site / "pinned_plugin.py").write_text(
        textwrap.dedent(
            """
            from metaclaw_core import ScoredSkill, Skill, hookimpl

            @hookimpl
            def metaclaw_retrieve(query, snapshot, **kw):
                s = Skill(name="from-entry-point", description="d", body="Loaded via entry point.")
                return [ScoredSkill(skill=s, score=1.0)]
            """
        )
    )
    dist = site / "pinned_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pinned-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[metaclaw]\npinned = pinned_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    settings = make_settings(tmp_path / "h", load_entrypoints=True)
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        inj = engine.before_call(CallContext(messages=[Message(role="user", content="x")]))
    assert inj.skill_names == ["from-entry-point"]
    sys.modules.pop("pinned_plugin", None)


class MisspeltRetrieval:
    """A hook implementation whose name is no hook: ``retreive``."""

    @hookimpl
    def metaclaw_retreive(self, query: str, **kw: Any) -> list[ScoredSkill]:
        return [ScoredSkill(skill=PINNED, score=1.0)]


def test_misspelt_hookimpl_is_a_clear_error(make_engine: Any, settings: Any) -> None:
    with pytest.raises(ConfigError, match=r"metaclaw_retreive.*did you mean 'metaclaw_retrieve'"):
        make_engine(settings, plugins=[MisspeltRetrieval()])


def test_misspelt_hookimpl_registered_later_is_refused(engine: MetaClaw) -> None:
    from metaclaw_core.plugin_manager import register_checked

    with pytest.raises(ConfigError, match="unknown hook implementation"):
        register_checked(engine.pm, MisspeltRetrieval(), "late")
    assert engine.pm.get_plugin("late") is None  # not left half-registered
