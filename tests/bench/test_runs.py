"""Whole runs of a tiny suite: the real LangChain agent (ChatOpenAI + create_agent) against a
scripted OpenAI-compatible server, the real engine with MiniLM, real checks; baseline vs
skills, resuming after a crash, an agent that escapes its workspace, a broken evolver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import MetaClaw
from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.bench.report import markdown
from metaclaw_core.bench.runner import BenchError, BenchRun, RoundResult, RunConfig
from metaclaw_core.bench.suite import load_suite
from tests.bench.suites import TIME_FEEDBACK, day01, engine_factory, write_suite
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import RecordedRequest, Reply, ScriptedOpenAI, ToolCallReply

WRONG_WRITE = (
    'I will save it.\n<tool_call>{"name": "write_file", "arguments": '
    '{"path": "day01/out.json", "content": "{\\"when\\": \\"09:30\\"}"}}</tool_call>'
)


class Model:
    """The scripted agent model: wrong at first, right once the lesson is in its prompt."""

    def __init__(self) -> None:
        self.day02_wrong_once = False  # answer day02 wrongly once even when taught (for resume)

    def __call__(self, req: RecordedRequest) -> Reply:
        body = req.json
        messages = body["messages"]
        if "tools" not in body:  # the evolver: a reply that is not JSON
            return Reply("Sorry, I cannot help with that.")
        last = messages[-1]
        if last["role"] == "tool":
            return Reply("Done.")
        text = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if "../escape.txt" in text:
            args = json.dumps({"path": "../escape.txt", "content": "x"})
            return Reply(None, tool_calls=[ToolCallReply("write_file", args)])
        if "day01/out.json" in text:
            return Reply(WRONG_WRITE)
        if "required format" in text:
            return Reply("\\bbox{A}")
        if "ISO 8601" in text:
            if self.day02_wrong_once:
                self.day02_wrong_once = False
                return Reply("\\bbox{A}")
            return Reply("\\bbox{B}" if TIME_FEEDBACK in system else "\\bbox{A}")
        return Reply("I don't know.")


@pytest.fixture
def server() -> Any:
    with ScriptedOpenAI(responder=Model()) as s:
        yield s


def _config(server: ScriptedOpenAI, mode: str, **kw: Any) -> RunConfig:
    return RunConfig(
        mode=mode,  # type: ignore[arg-type]
        model=ModelConfig(model="scripted-model", base_url=server.base_url, timeout_s=30),
        **{"check_timeout_s": 20, **kw},
    )


def _rounds(run_dir: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for p in sorted((run_dir / "days").glob("*/r*.json")):
        out[f"{p.parent.name}/{p.stem}"] = json.loads(p.read_text())
    return out


def test_skills_learn_from_feedback_and_beat_the_baseline(
    tmp_path: Path, server: ScriptedOpenAI, minilm: Any
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite"))
    base = BenchRun(suite, tmp_path / "base", _config(server, "baseline")).run()
    skills_run = BenchRun(
        suite,
        tmp_path / "skills",
        _config(server, "skills"),
        engine_factory=engine_factory(minilm),
    )
    skills = skills_run.run()

    b, s = _rounds(tmp_path / "base"), _rounds(tmp_path / "skills")
    # day01/r1: the text-form tool call ran (the file exists) but the check failed
    for rounds, run in ((b, "base"), (s, "skills")):
        r1 = rounds["day01/r1"]
        assert r1["score"] == 0.0 and "check failed: exit 1" in r1["reason"]
        assert [a["tool"] for a in r1["actions"]] == ["write_file"]
        assert (tmp_path / run / "workspaces" / "day01" / "day01" / "out.json").is_file()
        # the previous round's feedback comes before the next round's question
        assert rounds["day01/r2"]["previous_feedback"] == TIME_FEEDBACK
        assert rounds["day02/r1"]["previous_feedback"] is None  # a new day starts afresh
        assert rounds["day01/r2"]["score"] == pytest.approx(2 / 3)
    # the correction became a skill; the next day it was injected and the answer was right
    assert b["day02/r1"]["score"] == 0.0 and b["day02/r1"]["injected"] == []
    assert s["day02/r1"]["score"] == 1.0 and s["day02/r1"]["injected"]
    assert s["day02/r1"]["generation"] > s["day01/r1"]["generation"]
    assert base["score"] < skills["score"]
    assert skills["days"][0]["skills_learned"] and skills["days_complete"] == 2
    day01 = json.loads((tmp_path / "skills" / "days" / "day01" / "day.json").read_text())
    assert [g["reason"].split(":")[0] for g in day01["generations"]] == ["feedback", "feedback"]
    added = sorted(n for g in day01["generations"] for n in g["added"])
    assert skills["days"][0]["skills_learned"] == added
    # baseline: nothing injected in any request; skills: the lesson is in day02's prompt
    agent_reqs = [r.json for r in server.chat_requests() if "tools" in r.json]
    taught = [r for r in agent_reqs if TIME_FEEDBACK in r["messages"][0]["content"]]
    assert any("ISO 8601" in r["messages"][-1]["content"] for r in taught)
    baseline_reqs = agent_reqs[:4]  # the baseline ran first: 2 + 1 + 1 model calls
    assert all("<metaclaw-skills>" not in r["messages"][0]["content"] for r in baseline_reqs)
    r2 = next(r for r in agent_reqs if "required format" in r["messages"][-1]["content"])
    assert [m["role"] for m in r2["messages"]] == ["system", "user", "user"]
    assert r2["messages"][1]["content"] == f"Feedback on your previous answer: {TIME_FEEDBACK}"
    # every round's actions and transcript are kept
    assert s["day01/r1"]["transcript"][-1]["content"] == "Done."
    assert s["day01/r1"]["trajectory_ids"]
    # the corrections became skills about the question alone, their notes self-contained
    engine = MetaClaw(_settings_of(tmp_path / "skills"), plugins=[SharedEmbedder(minilm)])
    try:
        learned = {sk.name: sk for sk in engine.library.live()}
    finally:
        engine.close()
    assert len(learned) == 2
    assert not any("Feedback on your previous answer" in sk.description for sk in learned.values())
    assert any(sk.body.startswith(TIME_FEEDBACK) for sk in learned.values())
    assert any("C (2026-...): C is correct." in sk.body for sk in learned.values())
    md = markdown([base, skills])
    assert "| day02 | 0.000 | 1.000 |" in md and "## Learning: skills" in md


def test_a_crash_resumes_at_the_day_it_stopped(
    tmp_path: Path, server: ScriptedOpenAI, minilm: Any
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite"))
    model: Model = server.responder  # type: ignore[assignment]
    model.day02_wrong_once = True

    class Crash(BaseException):
        pass

    def crash_after_day02(r: RoundResult) -> None:
        if r.day == "day02":
            raise Crash

    run_dir = tmp_path / "run"
    first = BenchRun(
        suite,
        run_dir,
        _config(server, "skills"),
        engine_factory=engine_factory(minilm),
        on_round=crash_after_day02,
    )
    with pytest.raises(Crash):
        first.run()
    assert (run_dir / "days" / "day01" / "day.json").is_file()
    assert not (run_dir / "days" / "day02" / "day.json").exists()
    start = json.loads((run_dir / "days" / "day02" / "start.json").read_text())["generation"]
    asked_day01 = sum(
        "day01/out.json" in r.json["messages"][-1].get("content", "")
        for r in server.chat_requests()
        if "tools" in r.json
    )

    summary = BenchRun(
        suite, run_dir, _config(server, "skills"), engine_factory=engine_factory(minilm)
    ).run()
    assert summary["days_complete"] == 2 and summary["rounds"] == 3
    again = sum(
        "day01/out.json" in r.json["messages"][-1].get("content", "")
        for r in server.chat_requests()
        if "tools" in r.json
    )
    assert again == asked_day01, "day01 ran again"
    day02 = _rounds(run_dir)["day02/r1"]
    assert day02["score"] == 1.0 and day02["generation"] > start  # rolled back, then re-run
    engine = MetaClaw(_settings_of(run_dir), plugins=[SharedEmbedder(minilm)])
    try:
        reasons = [g.reason for g in engine.library.history()]
    finally:
        engine.close()
    assert any(r == "bench: resume day02" for r in reasons)

    manifest = json.loads((run_dir / "run.json").read_text())
    assert [r["base_url"] for r in manifest["resumes"]] == [server.base_url]
    with pytest.raises(BenchError, match=r"holds a different run \(mode: 'skills' there"):
        BenchRun(suite, run_dir, _config(server, "baseline")).run()


def _settings_of(run_dir: Path) -> Any:
    from metaclaw_core import Settings

    return Settings(home=run_dir / "metaclaw", load_entrypoints=False)


def test_escapes_hanging_checks_and_a_broken_evolver_score_zero_and_go_on(
    tmp_path: Path, server: ScriptedOpenAI, minilm: Any
) -> None:
    day = day01()
    day["rounds"][0]["question"] = "Save a note to ../escape.txt please."
    day["rounds"][0]["eval"]["command"] = "sleep 30"
    hanging = json.loads(json.dumps(day["rounds"][0]))
    hanging["id"] = "r3"
    hanging["question"] = "Record the meeting time in day01/out.json."
    day["rounds"].append(hanging)
    suite = load_suite(write_suite(tmp_path / "suite", [day]))
    run_dir = tmp_path / "run"
    summary = BenchRun(
        suite,
        run_dir,
        _config(
            server,
            "skills",
            check_timeout_s=1,
            learn="evolver",
            evolver_base_url=server.base_url,
        ),
        engine_factory=engine_factory(minilm),
    ).run()
    rounds = _rounds(run_dir)
    assert rounds["day01/r1"]["score"] == 0.0
    assert "outside its workspace: ../escape.txt" in rounds["day01/r1"]["reason"]
    assert not (run_dir / "workspaces" / "escape.txt").exists()
    assert rounds["day01/r3"]["score"] == 0.0 and "timed out" in rounds["day01/r3"]["reason"]
    assert summary["days_complete"] == 1 and summary["rounds"] == 3
    day_meta = json.loads((run_dir / "days" / "day01" / "day.json").read_text())
    llm = [e for e in day_meta["evolutions"] if e.get("trigger") == "end of day01"]
    assert llm and "error" in llm[0] and "evolver" in llm[0]["error"]


def test_a_crash_in_a_day_that_learned_nothing_resumes_too(
    tmp_path: Path, server: ScriptedOpenAI, minilm: Any
) -> None:
    # day02 is answered right (the lesson of day01 is injected): nothing to roll back
    suite = load_suite(write_suite(tmp_path / "suite"))
    run_dir = tmp_path / "run"

    class Crash(BaseException):
        pass

    def crash(r: RoundResult) -> None:
        if r.day == "day02":
            raise Crash

    with pytest.raises(Crash):
        BenchRun(
            suite,
            run_dir,
            _config(server, "skills"),
            engine_factory=engine_factory(minilm),
            on_round=crash,
        ).run()
    start = json.loads((run_dir / "days" / "day02" / "start.json").read_text())["generation"]
    summary = BenchRun(
        suite, run_dir, _config(server, "skills"), engine_factory=engine_factory(minilm)
    ).run()
    assert summary["days_complete"] == 2
    day02 = _rounds(run_dir)["day02/r1"]
    assert day02["score"] == 1.0 and day02["generation"] == start  # no rollback was needed


def test_with_validation_a_skill_that_fixes_nothing_it_was_learned_from_is_refused(
    tmp_path: Path, server: ScriptedOpenAI, minilm: Any
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite"))
    run_dir = tmp_path / "validated"
    parallelism: list[int] = []
    make = engine_factory(minilm)

    def factory(settings: Any) -> Any:
        parallelism.append(settings.validation.parallelism)
        return make(settings)

    summary = BenchRun(
        suite, run_dir, _config(server, "skills", validate=True), engine_factory=factory
    ).run()
    # the scripted model is on 127.0.0.1, like `metaclaw models serve`: one replay at a time
    assert parallelism and set(parallelism) == {1}
    day01 = json.loads((run_dir / "days" / "day01" / "day.json").read_text())
    by_round = {e["round"]: e for e in day01["evolutions"]}
    # r1's lesson is about a file the replay cannot re-check: not validated, live
    (r1,) = by_round["r1"]["validation"].values()
    assert r1["state"] == "not-validated" and by_round["r1"]["live"]
    # r2's lesson: the model answers the same with it (2 of 3 right again): refused
    (r2,) = by_round["r2"]["validation"].values()
    assert r2["state"] == "failed" and r2["fixed"] == 0 and r2["calls"] >= 1
    assert by_round["r2"]["live"] == [] and by_round["r2"]["rejected"]
    assert summary["days_complete"] == 2
    assert _rounds(run_dir)["day02/r1"]["score"] == 1.0  # the lesson that went live still helps


def test_a_model_on_this_machine_is_told_apart_from_a_hosted_one() -> None:
    from metaclaw_core.bench.runner import _on_this_machine

    assert _on_this_machine("http://127.0.0.1:8080/v1")
    assert _on_this_machine("http://localhost:8080/v1")
    assert _on_this_machine("http://[::1]:8080/v1")
    assert not _on_this_machine("https://api.openai.com/v1")
    assert not _on_this_machine("http://10.0.0.5:8000/v1")
