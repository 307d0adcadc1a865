"""The PRM judge: m votes, strict majority, no score rather than a wrong one, hard time-out,
and background scoring that never touches the hot path."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import CallContext, Message, ModelOutput, Trajectory
from metaclaw_core.config import JudgeSettings
from metaclaw_core.reward import CallableCheck, CommandCheck, PRMJudge, majority_vote, parse_vote
from tests.fastloop.conftest import JUDGE_KEY, fastloop_settings
from tests.support.scripted_openai import RecordedRequest, Reply, ScriptedOpenAI, error_reply

TRAJ = Trajectory(
    query="What is 2 + 2?",
    messages=[Message(role="user", content="What is 2 + 2?")],
    output=ModelOutput(text="5"),
)


def judge_on(server: ScriptedOpenAI, **kw: Any) -> PRMJudge:
    options: dict[str, Any] = {"max_retries": 0, "timeout_s": 2.0, **kw}
    s = JudgeSettings(base_url=server.base_url, api_key=JUDGE_KEY, model="j", **options)
    return PRMJudge(s)


def votes(*replies: Reply) -> Any:
    """A responder handing out ``replies`` in turn, whatever order the parallel votes come in."""
    it = itertools.cycle(replies)
    lock = threading.Lock()

    def responder(req: RecordedRequest) -> Reply:
        with lock:
            return next(it)

    return responder


def vote(score: int, reason: str = "because") -> Reply:
    return Reply(f'{{"reason": "{reason}", "score": {score}}}')


def test_majority_of_three_votes_scores(llm: ScriptedOpenAI) -> None:
    llm.responder = votes(vote(-1, "2 + 2 is 4"), vote(-1), vote(1))
    judgment = judge_on(llm).judge(TRAJ)
    assert judgment.score == -1
    reward = judgment.reward
    assert reward is not None and reward.value == -1.0 and reward.source == "judge"
    assert "2 of 3 agree" in (reward.detail or "")
    sent = llm.chat_requests()
    assert len(sent) == 3
    prompt = sent[0].json["messages"][1]["content"]
    assert "What is 2 + 2?" in prompt and "Answer: 5" in prompt


def test_a_three_way_tie_gives_no_score(llm: ScriptedOpenAI) -> None:
    llm.responder = votes(vote(1), vote(0), vote(-1))
    judgment = judge_on(llm).judge(TRAJ)
    assert judgment.score is None and judgment.reward is None
    assert "no majority" in (judgment.why_none or "")


def test_failed_votes_count_against_the_majority(llm: ScriptedOpenAI) -> None:
    llm.responder = votes(vote(1), error_reply(500, "down", type="server_error"), Reply("hmm?"))
    judgment = judge_on(llm).judge(TRAJ)
    assert judgment.score is None  # one good vote of three is not a majority
    assert sum(v.value is None for v in judgment.votes) == 2


def test_broken_replies_give_no_score(llm: ScriptedOpenAI) -> None:
    llm.responder = votes(Reply("I think it is fine"), Reply('{"score": 7}'), Reply("[]"))
    judgment = judge_on(llm).judge(TRAJ)
    assert judgment.score is None
    assert all(v.error for v in judgment.votes)


def test_hard_deadline_returns_without_the_late_votes(llm: ScriptedOpenAI) -> None:
    llm.responder = votes(Reply('{"reason": "x", "score": 1}', delay_s=3.0))
    judge = judge_on(llm, deadline_s=0.4, timeout_s=5.0)
    t0 = time.monotonic()
    judgment = judge.judge(TRAJ)
    assert time.monotonic() - t0 < 1.0
    assert judgment.score is None
    assert all(v.value is None for v in judgment.votes)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"reason": "ok", "score": 1}', 1),
        ('```json\n{"score": "-1", "reason": "wrong"}\n```', -1),
        ("The answer is wrong.\nScore: -1", -1),
        ('{"score": 0.0}', 0),
    ],
)
def test_votes_are_parsed_robustly(text: str, value: int) -> None:
    assert parse_vote(text)[0] == value


def test_majority_needs_more_than_half_of_the_votes_asked() -> None:
    assert majority_vote([1, 1, None], 3) == 1
    assert majority_vote([1, None, None], 3) is None
    assert majority_vote([1, 1, -1, -1], 4) is None
    assert majority_vote([0, 0, 0, 1, -1], 5) == 0


def test_judge_scores_stored_trajectories_in_the_background(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    llm.responder = votes(Reply('{"reason": "wrong sum", "score": -1}', delay_s=0.2))
    settings = fastloop_settings(tmp_path / "h", None, judge__base_url=llm.base_url)
    engine = make_engine(settings)
    ctx = CallContext(messages=[Message(role="user", content="What is 2 + 2?")])
    engine.before_call(ctx)
    t0 = time.perf_counter()
    tid = engine.after_call(ctx, ModelOutput(text="5"))
    assert (time.perf_counter() - t0) < 0.05  # the hot path only journals and enqueues
    assert tid is not None
    assert engine.flush(10)
    assert engine.fastloop.wait_idle(10)
    assert engine.flush(10)
    stored = engine.trajectories.get(tid)
    assert [(r.source, r.value) for r in stored.rewards] == [("judge", -1.0)]
    assert len(llm.chat_requests()) == 3
    assert engine.status()["fastloop"]["scored"] == 1


def test_verifiable_checks_answer_before_the_judge(
    make_engine: Any, tmp_path: Path, llm: ScriptedOpenAI
) -> None:
    llm.default = vote(1)
    script = tmp_path / "check.py"
    script.write_text(
        "import json, sys\n"
        "t = json.load(sys.stdin)\n"
        "if 'sum' not in t['query']: sys.exit(125)\n"
        "sys.exit(0 if t['output']['text'].strip() == '4' else 1)\n"
    )
    settings = fastloop_settings(
        tmp_path / "h",
        None,
        judge__base_url=llm.base_url,
        rewards__check_command=f"python3 {script}",
    )
    polite = CallableCheck(lambda t: False if "stupid" in t.output.text else None, source="tone")
    engine = make_engine(settings, [polite])
    ids = {}
    for task, answer in [
        ("What is the sum of 2 and 2?", "4"),
        ("Give the sum of 3 and 3", "7"),
        ("Say hi", "hi, stupid"),
        ("Say hello", "hello"),
    ]:
        ctx = CallContext(messages=[Message(role="user", content=task)])
        ids[task] = engine.after_call(ctx, ModelOutput(text=answer))
    assert engine.flush(10) and engine.fastloop.wait_idle(20) and engine.flush(10)
    got = {
        task: [(r.source, r.value) for r in engine.trajectories.get(i).rewards]
        for task, i in ids.items()
    }
    assert got == {
        "What is the sum of 2 and 2?": [("check", 1.0)],
        "Give the sum of 3 and 3": [("check", -1.0)],
        "Say hi": [("tone", -1.0)],
        "Say hello": [("judge", 1.0)],
    }


def test_command_check_that_hangs_gives_no_score(tmp_path: Path) -> None:
    check = CommandCheck(["sleep", "5"], timeout_s=0.2)
    assert check.score(TRAJ) is None
