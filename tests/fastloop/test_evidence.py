"""What a user reads: `metaclaw skills evidence` and `metaclaw report` on a real store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import metaclaw_core.plugins.embedder as builtin_embedder
from metaclaw_core.cli import app
from metaclaw_core.evolve import SkillEvolver
from metaclaw_core.evolve.evidence import learning_curve, skill_evidence
from tests.fastloop.test_validation import ISO, engine_with, seed, skills_reply
from tests.support.scripted_openai import ScriptedOpenAI

runner = CliRunner()


@pytest.fixture
def learned(make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI, agent: ScriptedOpenAI) -> Any:
    engine = engine_with(make_engine, tmp_path, llm, agent.base_url)
    engine.settings.holdout.enabled = True
    seed(engine)
    llm.enqueue(skills_reply(ISO))
    assert SkillEvolver(engine).evolve().live == ["iso-times"]
    return engine


def test_evidence_shows_the_replays_and_the_holdout_of_a_skill(learned: Any) -> None:
    (record,) = skill_evidence(learned, "iso-times")
    assert record["live"] is True
    assert record["replays"]["fixed"] == 2 and record["replays"]["regressed"] == 0
    assert record["replays"]["last"]["fixed"] == 2
    assert record["holdout"]["state"] == "holdout"
    assert record["holdout"]["injected"] == 0 and record["holdout"]["held_out"] == 0


def test_the_learning_curve_counts_rewards_and_failures_per_generation_and_day(
    learned: Any,
) -> None:
    curve = learning_curve(learned)
    (g0,) = [g for g in curve["generations"] if g["generation"] == 0]
    assert g0["calls"] == 4 and g0["scored"] == 4
    assert g0["mean_reward"] == 0.0 and g0["failure_rate"] == 0.5
    (day,) = curve["days"]
    assert day["calls"] == 4


@pytest.fixture
def agent() -> Any:
    from tests.fastloop.test_validation import agent_answer

    with ScriptedOpenAI(responder=agent_answer) as server:
        yield server


def test_the_commands_print_evidence_and_write_the_png(
    learned: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Any
) -> None:
    home = learned.settings.home
    learned.close()
    monkeypatch.setenv("METACLAW_HOME", str(home))
    monkeypatch.setenv("METACLAW_LOAD_ENTRYPOINTS", "false")
    monkeypatch.setattr(builtin_embedder, "make_embedder", lambda _s, **_k: minilm)
    got = runner.invoke(app, ["skills", "evidence", "iso-times", "--json"], catch_exceptions=False)
    assert got.exit_code == 0, got.output
    (record,) = json.loads(got.output)["skills"]
    assert record["replays"]["fixed"] == 2 and record["holdout"]["state"] == "holdout"
    table = runner.invoke(app, ["skills", "evidence"], catch_exceptions=False)
    assert table.exit_code == 0 and "iso-times" in table.output and "holdout" in table.output

    png = tmp_path / "curve.png"
    got = runner.invoke(app, ["report", "--png", str(png), "--json"], catch_exceptions=False)
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["png"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["generations"][0]["calls"] == 4
    text = runner.invoke(app, ["report", "--png", ""], catch_exceptions=False)
    assert text.exit_code == 0 and "learning curve per generation" in text.output
