"""Manual review and the other fast-loop commands, as a user runs them (typer's CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import metaclaw_core.plugins.embedder as builtin_embedder
from metaclaw_core import MetaClaw, Settings
from metaclaw_core.cli import app
from tests.fastloop.conftest import EVOLVER_KEY, fail_call, skills_reply
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import Reply, ScriptedOpenAI

runner = CliRunner()

ISO = {
    "name": "iso-timestamps-with-offset",
    "description": "Use when writing or logging a date or time.",
    "body": "Write timestamps in ISO 8601 with the UTC offset, e.g. 2026-11-30T09:30:00+08:00.",
    "failures": [1],
}
ZONE = {
    "name": "ask-for-the-time-zone",
    "description": "Use when a request gives a time without a time zone.",
    "body": "Ask which time zone the user means before scheduling anything.",
    "failures": [2],
}


def run(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Any, llm: ScriptedOpenAI) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("METACLAW_HOME", str(h))
    monkeypatch.setenv("METACLAW_LOAD_ENTRYPOINTS", "false")
    monkeypatch.setenv("METACLAW_EVOLVER__BASE_URL", llm.base_url)
    monkeypatch.setenv("METACLAW_EVOLVER__MODEL", "scripted-evolver")
    monkeypatch.setenv("METACLAW_EVOLVER__API_KEY", EVOLVER_KEY)
    monkeypatch.setenv("METACLAW_EVOLVER__AUTO", "false")
    monkeypatch.setenv("METACLAW_VETTING__REVIEW", "manual")
    # Every engine the commands open reuses the MiniLM this session loaded (still the real one).
    monkeypatch.setattr(builtin_embedder, "make_embedder", lambda _s, **_k: minilm)
    return h


def capture_failures(minilm: Any) -> list[str]:
    settings = Settings(load_entrypoints=False)
    settings.store.flush_interval_s = 0.02
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as engine:
        ids = [
            fail_call(engine, "Log when the Singapore standup starts", "9:30"),
            fail_call(engine, "Schedule the review for 14:00", "Scheduled for 14:00."),
        ]
        assert engine.flush(10)
    return ids


def test_manual_review_candidates_wait_until_approved(
    home: Path, llm: ScriptedOpenAI, minilm: Any
) -> None:
    ids = capture_failures(minilm)
    llm.enqueue(skills_reply(ISO, ZONE))

    r = run("evolve", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["review"] == "manual" and report["generation"] is None
    assert sorted(report["pending"]) == ["ask-for-the-time-zone", "iso-timestamps-with-offset"]
    assert sorted(report["failures"]) == sorted(ids)

    assert json.loads(run("skills", "list", "--json").stdout)["skills"] == []
    pending = json.loads(run("skills", "pending", "--json").stdout)["pending"]
    assert {p["name"]: p["status"] for p in pending} == {
        "ask-for-the-time-zone": "pending",
        "iso-timestamps-with-offset": "pending",
    }
    iso = next(p for p in pending if p["name"] == "iso-timestamps-with-offset")
    assert iso["provenance"] == [report["failures"][0]] and iso["source"] == "evolver"
    assert "iso-timestamps-with-offset" in run("skills", "pending").stdout

    r = run("skills", "approve", "iso-timestamps-with-offset", "--json")
    assert r.exit_code == 0, r.output
    approved = json.loads(r.stdout)
    assert approved["approved"] == ["iso-timestamps-with-offset"]
    assert approved["generation"]["number"] == 1
    assert approved["generation"]["added"] == ["iso-timestamps-with-offset"]

    got = json.loads(run("retrieve", "Log the Jakarta sync time", "--json").stdout)
    assert got["generation"] == 1
    assert [s["name"] for s in got["skills"]] == ["iso-timestamps-with-offset"]

    stats = json.loads(run("skills", "stats", "--json").stdout)
    assert stats["generation"] == 1 and stats["retired"] is None
    assert [(s["name"], s["injected"], s["verdict"]) for s in stats["skills"]] == [
        ("iso-timestamps-with-offset", 0, "too-few-samples")
    ]

    r = run("skills", "reject", "ask-for-the-time-zone", "--json")
    assert json.loads(r.stdout) == {"rejected": ["ask-for-the-time-zone"]}
    assert json.loads(run("skills", "pending", "--json").stdout) == {"pending": []}
    history = json.loads(run("skills", "history", "--json").stdout)["generations"]
    assert [g["reason"] for g in history] == ["approve iso-timestamps-with-offset"]

    r = run("skills", "approve", "nope")
    assert r.exit_code == 1 and "no pending candidate named nope" in r.stderr


def test_evolve_errors_are_one_clear_line(home: Path, llm: ScriptedOpenAI, minilm: Any) -> None:
    capture_failures(minilm)
    llm.enqueue(Reply("this is not json"))
    r = run("evolve")
    assert r.exit_code == 1
    assert r.stderr.startswith("error: the evolver LLM at http://127.0.0.1:")
    assert "did not answer with JSON" in r.stderr and EVOLVER_KEY not in r.output
    assert json.loads(run("skills", "pending", "--json").stdout) == {"pending": []}


def test_evolve_dry_run_and_feedback_correction(
    home: Path, llm: ScriptedOpenAI, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = capture_failures(minilm)
    llm.enqueue(skills_reply(ISO))
    dry = json.loads(run("evolve", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and [c["verdict"] for c in dry["candidates"]] == ["accepted"]
    assert json.loads(run("skills", "pending", "--json").stdout) == {"pending": []}

    monkeypatch.setenv("METACLAW_VETTING__REVIEW", "auto")
    monkeypatch.delenv("METACLAW_EVOLVER__BASE_URL")  # the feedback mode needs no LLM
    correction = "Always confirm the time zone before scheduling."
    r = run("feedback", "--correction", correction, "--", ids[1], "-1")  # `--`: -1 is no option
    assert r.exit_code == 0, r.output
    assert "recorded -1.00" in r.stdout and "[live] confirm-time-zone-before-scheduling" in r.stdout
    live = json.loads(run("skills", "list", "--json").stdout)["skills"]
    assert [(s["name"], s["source"], s["provenance"]) for s in live] == [
        ("confirm-time-zone-before-scheduling", "feedback", [ids[1]])
    ]
    r = run("evolve", "--mode", "feedback", "--json")
    assert json.loads(r.stdout)["message"] == "no new corrections to learn from"
    r = run("evolve")
    assert r.exit_code == 1 and "METACLAW_EVOLVER__BASE_URL" in r.stderr
    assert "--mode feedback" in r.stderr


def test_judge_command_scores_one_trajectory_and_records_it(
    home: Path, llm: ScriptedOpenAI, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = capture_failures(minilm)
    monkeypatch.setenv("METACLAW_JUDGE__BASE_URL", llm.base_url)
    llm.default = Reply('{"reason": "no offset in the time", "score": -1}')
    r = run("judge", ids[0], "--record", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["score"] == -1 and got["recorded"] is True and len(got["votes"]) == 3
    assert got["votes"][0]["reason"] == "no offset in the time"
    shown = json.loads(run("trajectories", "show", ids[0], "--json").stdout)
    assert sorted((x["source"], x["value"]) for x in shown["rewards"]) == [
        ("judge", -1.0),
        ("user", -1.0),
    ]
    monkeypatch.delenv("METACLAW_JUDGE__BASE_URL")
    r = run("judge", ids[0])
    assert r.exit_code == 1 and "METACLAW_JUDGE__BASE_URL" in r.stderr
