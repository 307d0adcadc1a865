"""Fixtures of the fast-loop tests: a scripted OpenAI-compatible server and engines wired to it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from metaclaw_core import CallContext, Message, MetaClaw, ModelOutput, Settings
from tests.support.engines import make_settings
from tests.support.scripted_openai import Reply, ScriptedOpenAI

EVOLVER_KEY = "sk-test-evolver-0123456789abcdefghij"
JUDGE_KEY = "sk-test-judge-0123456789abcdefghijkl"


@pytest.fixture
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        http = server._server
        assert http is not None
        default_handle_error = http.handle_error

        def quiet(request: Any, client_address: Any) -> None:
            # A client that timed out hung up before the scripted delay ended: expected here.
            if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
                return
            default_handle_error(request, client_address)

        http.handle_error = quiet  # type: ignore[method-assign]
        yield server


def fastloop_settings(home: Path, base_url: str | None, **overrides: Any) -> Settings:
    """Settings with the evolver (and optionally the judge) on the scripted server, fast retries,
    and no automatic evolution unless a test turns it on."""
    s = make_settings(home)
    s.evolver.base_url = base_url
    s.evolver.model = "scripted-evolver"
    s.evolver.api_key = SecretStr(EVOLVER_KEY)
    s.evolver.timeout_s = 3.0
    s.evolver.max_retries = 1
    s.evolver.backoff_s = 0.01
    s.evolver.auto = False
    s.evolver.min_interval_s = 0.0
    s.judge.model = "scripted-judge"
    s.judge.api_key = SecretStr(JUDGE_KEY)
    s.judge.max_retries = 0
    s.judge.timeout_s = 2.0
    s.judge.deadline_s = 3.0
    for dotted, value in overrides.items():
        section, _, key = dotted.partition("__")
        setattr(getattr(s, section), key, value)
    return s


def skills_reply(*skills: dict[str, Any]) -> Reply:
    """An evolver answer proposing ``skills`` (missing fields get defaults)."""
    full = [{"category": None, "updates": None, "failures": [1], **s} for s in skills]
    return Reply(json.dumps({"skills": full}))


def fail_call(
    engine: MetaClaw,
    task: str,
    answer: str,
    *,
    error: str | None = None,
    reward: float | None = -1.0,
    detail: str | None = None,
    session_id: str | None = None,
    system: str = "You are a helpful scheduling assistant.",
    agent: str | None = None,
) -> str:
    """One captured call that failed (host error, or a reward <= 0); returns its id."""
    ctx = CallContext(
        messages=[Message(role="system", content=system), Message(role="user", content=task)],
        session_id=session_id,
        agent=agent,
    )
    engine.before_call(ctx)
    tid = engine.after_call(ctx, ModelOutput(text=answer), error=error)
    assert tid is not None
    if reward is not None:
        engine.feedback(tid, reward, detail=detail)
    return tid


def ask(engine: MetaClaw, task: str, agent: str | None = None) -> Any:
    return engine.before_call(
        CallContext(messages=[Message(role="user", content=task)], agent=agent)
    )
