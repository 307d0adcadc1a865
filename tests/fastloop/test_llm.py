"""The OpenAI-compatible client of the learning roles, against a real HTTP server."""

from __future__ import annotations

import logging
import time

import pytest

from metaclaw_core.config import EvolverSettings
from metaclaw_core.llm import (
    LLMClient,
    LLMNotConfiguredError,
    LLMReplyError,
    LLMUnavailableError,
    extract_json,
)
from tests.fastloop.conftest import EVOLVER_KEY
from tests.support.scripted_openai import RecordedRequest, Reply, ScriptedOpenAI, error_reply

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def client(server: ScriptedOpenAI, **kw: object) -> LLMClient:
    options: dict[str, object] = {"timeout_s": 2.0, "max_retries": 2, "backoff_s": 0.01, **kw}
    s = EvolverSettings(
        base_url=server.base_url,
        api_key=EVOLVER_KEY,  # type: ignore[arg-type]
        model="m",
        **options,  # type: ignore[arg-type]
    )
    return LLMClient("evolver", s)


def test_retries_429_and_5xx_with_backoff_then_succeeds(llm: ScriptedOpenAI) -> None:
    slow_down = error_reply(429, "rate limited", type="rate_limit_error")
    slow_down.headers = {"retry-after": "0.05"}
    llm.enqueue(
        slow_down, error_reply(503, "overloaded", type="server_error"), Reply('{"ok": true}')
    )
    data, reply = client(llm).chat_json([{"role": "user", "content": "hi"}], json_schema=SCHEMA)
    assert data == {"ok": True} and reply.attempts == 3
    sent = llm.chat_requests()
    assert len(sent) == 3
    assert sent[0].headers["authorization"] == f"Bearer {EVOLVER_KEY}"
    assert sent[0].json["response_format"]["type"] == "json_schema"
    assert sent[0].json["model"] == "m"


def test_gives_up_with_a_message_that_names_the_role_and_never_the_key(
    llm: ScriptedOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.default = error_reply(500, "boom", type="server_error")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LLMUnavailableError) as err:
        client(llm).chat([{"role": "user", "content": "hi"}])
    msg = str(err.value)
    assert "evolver" in msg and "failed after 3 attempt(s)" in msg and "HTTP 500" in msg
    assert EVOLVER_KEY not in msg and EVOLVER_KEY not in caplog.text
    assert len(llm.chat_requests()) == 3


def test_a_hung_server_times_out(llm: ScriptedOpenAI) -> None:
    llm.default = Reply("late", delay_s=1.5)
    c = client(llm, timeout_s=0.3, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailableError, match="timed out"):
        c.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - t0 < 1.2


def test_falls_back_when_the_server_refuses_response_format(llm: ScriptedOpenAI) -> None:
    def picky(req: RecordedRequest) -> Reply:
        if "response_format" in req.json:
            return error_reply(400, "response_format is not supported")
        return Reply('Here you go:\n```json\n{"ok": true}\n```')

    llm.responder = picky
    c = client(llm)
    data, reply = c.chat_json([{"role": "user", "content": "hi"}], json_schema=SCHEMA)
    assert data == {"ok": True} and reply.structured_output == "off"
    kinds = [r.json.get("response_format", {}).get("type") for r in llm.chat_requests()]
    assert kinds == ["json_schema", "json_object", None]
    c.chat_json([{"role": "user", "content": "again"}], json_schema=SCHEMA)
    assert "response_format" not in llm.chat_requests()[-1].json  # remembered


def test_falls_back_when_llama_cpp_refuses_json_schema_with_a_500(llm: ScriptedOpenAI) -> None:
    """llama-cpp-python's server (0.3.x) takes json_object but not json_schema, and says so
    with an HTTP 500 carrying its validation error (seen with `metaclaw models serve`)."""

    def llama_cpp(req: RecordedRequest) -> Reply:
        if req.json.get("response_format", {}).get("type") == "json_schema":
            detail = (
                "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                "'input': 'json_schema'}"
            )
            return Reply(
                status=500, error={"error": {"message": detail, "type": "internal_server_error"}}
            )
        return Reply('{"ok": true}')

    llm.responder = llama_cpp
    c = client(llm, max_retries=0)  # the fallback is not a retry
    data, reply = c.chat_json([{"role": "user", "content": "hi"}], json_schema=SCHEMA)
    assert data == {"ok": True} and reply.structured_output == "json_object"
    kinds = [r.json.get("response_format", {}).get("type") for r in llm.chat_requests()]
    assert kinds == ["json_schema", "json_object"]


def test_a_500_without_response_format_in_it_is_retried_not_a_fallback(
    llm: ScriptedOpenAI,
) -> None:
    llm.enqueue(error_reply(500, "the GPU fell over"))
    llm.enqueue(Reply('{"ok": true}'))
    c = client(llm, max_retries=2, backoff_s=0.01)
    data, reply = c.chat_json([{"role": "user", "content": "hi"}], json_schema=SCHEMA)
    assert data == {"ok": True} and reply.structured_output == "json_schema"


def test_non_json_reply_is_a_reply_error(llm: ScriptedOpenAI) -> None:
    llm.enqueue(Reply("I would rather not."))
    with pytest.raises(LLMReplyError, match="did not answer with JSON"):
        client(llm).chat_json([{"role": "user", "content": "hi"}], json_schema=SCHEMA)


def test_unconfigured_role_says_which_setting_to_set() -> None:
    c = LLMClient("judge", EvolverSettings())
    with pytest.raises(LLMNotConfiguredError, match="METACLAW_JUDGE__BASE_URL"):
        c.chat([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure!\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ('The result is {"score": -1} as requested.', {"score": -1}),
        ("[1, 2, 3]", [1, 2, 3]),
    ],
)
def test_extract_json_tolerates_fences_and_prose(text: str, value: object) -> None:
    assert extract_json(text) == value


def test_extract_json_refuses_text_without_json() -> None:
    with pytest.raises(ValueError):
        extract_json("no braces here")
