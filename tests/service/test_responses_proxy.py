"""``/v1/responses`` with the real ``openai`` SDK's ``responses`` client and a scripted
Responses upstream: the block at the end of ``instructions`` or of Codex's leading developer
item, streaming event by event, function calls and their outputs, ``previous_response_id``,
unknown tools and items passed through, errors in OpenAI's shape."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from metaclaw_core.plugins.render import BLOCK_START
from tests.service.conftest import AgentService, captured_session
from tests.support.scripted_http import RecordedRequest, ScriptedCall, ScriptedReply

QUESTION = "How many kilometres is 26.2 miles?"
MODEL = "scripted-model"
TOOLS = [
    {
        "type": "function",
        "name": "convert",
        "description": "Convert a value between units",
        "parameters": {
            "type": "object",
            "properties": {"value": {"type": "number"}, "to": {"type": "string"}},
            "required": ["value", "to"],
        },
    }
]
ENVIRONMENT = "<environment_context>\n  <cwd>/work/repo</cwd>\n</environment_context>"


@pytest.fixture
def client(agent_service: AgentService) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{agent_service.url}/v1", api_key="client-key", max_retries=0, timeout=30
    ) as c:
        yield c


def sent(svc: AgentService) -> dict[str, Any]:
    body: dict[str, Any] = svc.responses.posts()[-1].json
    return body


def test_instructions_get_the_block_at_their_end_and_the_call_is_captured(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    agent_service.responses.enqueue(ScriptedReply("26.2 mi × 1.609 = 42.16 km"))
    resp = client.responses.create(
        model=MODEL, instructions="You are terse.", input=QUESTION, prompt_cache_key="codex-1"
    )
    assert resp.output_text == "26.2 mi × 1.609 = 42.16 km"
    body = sent(agent_service)
    assert body["instructions"].startswith("You are terse.\n\n" + BLOCK_START)
    assert body["input"] == QUESTION
    (t,) = captured_session(agent_service.http, "codex-1")
    assert t["framework"] == "responses-proxy" and t["injected_skills"] == ["unit-conversion"]
    assert t["query"] == QUESTION and t["output"]["text"] == "26.2 mi × 1.609 = 42.16 km"
    assert t["output"]["usage"]["total_tokens"] > 0 and t["output"]["finish_reason"] == "completed"
    assert [m["role"] for m in t["messages"]] == ["system", "user"]
    assert t["generation"] == agent_service.engine.generation


def test_codex_shape_gets_the_block_in_its_leading_developer_item_and_the_rest_untouched(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    developer = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "You are Codex. " * 40}],
    }
    rest = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions instructions>x"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": ENVIRONMENT}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
    ]
    tools: list[Any] = [
        *TOOLS,
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "patch",
            "format": {"type": "text"},
        },
        {"type": "namespace", "name": "mcp", "tools": []},
        {"type": "web_search"},
    ]

    def expect(req: RecordedRequest) -> None:
        body = req.json
        first = body["input"][0]
        assert first["content"][0] == developer["content"][0]  # the client's part, as sent
        assert first["content"][1]["type"] == "input_text"
        assert first["content"][1]["text"].startswith(BLOCK_START)
        assert body["input"][1:] == rest
        assert body["tools"] == tools and body["store"] is False
        assert "instructions" not in body

    agent_service.responses.expect = expect
    agent_service.responses.enqueue(ScriptedReply("42.16 km"), ScriptedReply("again"))
    client.responses.create(
        model=MODEL,
        input=[developer, *rest],  # type: ignore[list-item]
        tools=tools,
        store=False,
        prompt_cache_key="codex-shape",
    )
    assert agent_service.responses.failures == []
    # Sent back with the block, it is replaced, not repeated.
    again = sent(agent_service)["input"]
    client.responses.create(model=MODEL, input=again, tools=tools, store=False)
    assert agent_service.responses.failures == []
    assert json.dumps(sent(agent_service)["input"]).count(BLOCK_START) == 1

    (t,) = captured_session(agent_service.http, "codex-shape")
    assert t["query"] == QUESTION  # not the environment context
    assert [m["role"] for m in t["messages"]] == ["system", "system", "user", "user"]


def test_a_request_with_no_system_prompt_gets_instructions(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    agent_service.responses.enqueue(ScriptedReply("ok"))
    client.responses.create(model=MODEL, input=[{"role": "user", "content": QUESTION}])
    body = sent(agent_service)
    assert body["instructions"].startswith(BLOCK_START)
    assert body["input"] == [{"role": "user", "content": QUESTION}]


def test_stream_reaches_the_client_event_by_event(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    reply = ScriptedReply("one two three four five", hold_after_events=4)
    agent_service.responses.enqueue(reply)
    kinds: list[str] = []
    text: list[str] = []
    final = None
    for event in client.responses.create(
        model=MODEL, input=QUESTION, stream=True, prompt_cache_key="codex-stream"
    ):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text.append(event.delta)
            reply.release.set()  # the upstream holds the rest until the first word is here
        if event.type == "response.completed":
            final = event.response
    assert not reply.held_too_long
    assert "".join(text) == "one two three four five"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert final is not None and final.usage is not None
    (t,) = captured_session(agent_service.http, "codex-stream")
    assert t["output"]["text"] == "one two three four five" and t["error"] is None
    assert t["output"]["usage"]["total_tokens"] == final.usage.total_tokens
    assert t["metadata"]["stream_done"] is True


def test_function_call_round_trip_is_captured_with_calls_and_outputs(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    call = ScriptedCall("convert", {"value": 26.2, "to": "km"}, id="call_9")
    agent_service.responses.enqueue(ScriptedReply(None, tool_calls=[call]), ScriptedReply("42.16"))
    calls = []
    for event in client.responses.create(
        model=MODEL, input=QUESTION, tools=TOOLS, stream=True, prompt_cache_key="codex-tools"
    ):
        if event.type == "response.output_item.done" and event.item.type == "function_call":
            calls.append(event.item)
    (fc,) = calls
    assert (fc.call_id, fc.name, json.loads(fc.arguments)) == (
        "call_9",
        "convert",
        {"value": 26.2, "to": "km"},
    )
    items: list[Any] = [
        {"role": "user", "content": QUESTION},
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "convert",
            "arguments": fc.arguments,
        },
        {"type": "function_call_output", "call_id": "call_9", "output": "42.16"},
    ]
    second = client.responses.create(
        model=MODEL, input=items, tools=TOOLS, prompt_cache_key="codex-tools"
    )
    assert second.output_text == "42.16"
    assert sent(agent_service)["input"] == items
    newest, oldest = captured_session(agent_service.http, "codex-tools", n=2)
    assert oldest["output"]["tool_calls"] == [
        {"id": "call_9", "name": "convert", "arguments": fc.arguments}
    ]
    assert [m["role"] for m in newest["messages"]] == ["system", "user", "assistant", "tool"]
    assert newest["messages"][2]["tool_calls"][0]["id"] == "call_9"
    assert newest["messages"][3]["tool_call_id"] == "call_9"
    assert newest["messages"][3]["content"] == "42.16"


def test_previous_response_id_is_forwarded_and_only_what_is_shown_is_captured(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    agent_service.responses.enqueue(ScriptedReply("later answer"))
    client.responses.create(
        model=MODEL,
        previous_response_id="resp_earlier",
        input=[{"role": "user", "content": "and in metres?"}],
        prompt_cache_key="codex-prev",
    )
    assert sent(agent_service)["previous_response_id"] == "resp_earlier"
    (t,) = captured_session(agent_service.http, "codex-prev")
    assert [m["content"] for m in t["messages"] if m["role"] == "user"] == ["and in metres?"]


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_status_and_body(
    agent_service: AgentService, client: openai.OpenAI, stream: bool
) -> None:
    err = {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": None}
    }
    agent_service.responses.enqueue(ScriptedReply(status=429, error=err))
    with pytest.raises(openai.RateLimitError) as info:
        client.responses.create(
            model=MODEL, input=QUESTION, stream=stream, prompt_cache_key=f"codex-429-{stream}"
        )
    assert info.value.status_code == 429 and info.value.body == err["error"]
    (t,) = captured_session(agent_service.http, f"codex-429-{stream}")
    assert t["outcome"] == "error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"not json", None),
        (b"[]", None),
        (b'{"model": "m", "input": 3}', "input"),
        (b'{"model": "m", "input": ["hi"]}', "input[0]"),
        (b'{"model": "m", "input": "hi", "instructions": 1}', "instructions"),
        (b'{"model": 1, "input": "hi"}', "model"),
        (b'{"input": "hi", "stream": "yes"}', "stream"),
    ],
)
def test_malformed_bodies_are_400_in_openai_shape_before_anything_is_sent(
    agent_service: AgentService, body: bytes, param: str | None
) -> None:
    r = agent_service.http.post(
        "/v1/responses", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.json()["error"].get("param") == param
    assert agent_service.responses.posts() == []


def test_upstream_dropping_mid_stream_ends_with_an_error_event_and_an_error_capture(
    agent_service: AgentService, client: openai.OpenAI
) -> None:
    agent_service.responses.enqueue(ScriptedReply("one two three", drop_after_events=4))
    events = list(
        client.responses.create(
            model=MODEL, input=QUESTION, stream=True, prompt_cache_key="codex-drop"
        )
    )
    last = events[-1]
    assert last.type == "error" and "stream broke" in last.message
    (t,) = captured_session(agent_service.http, "codex-drop")
    assert t["outcome"] == "error" and t["output"]["text"] == "one"
    agent_service.responses.enqueue(ScriptedReply("fine"))
    assert client.responses.create(model=MODEL, input=QUESTION).output_text == "fine"


def test_client_leaving_mid_stream_closes_upstream_and_is_captured_as_an_error(
    agent_service: AgentService,
) -> None:
    reply = ScriptedReply("one two three four five six seven eight", hold_after_events=4)
    agent_service.responses.enqueue(reply)
    body = {"model": MODEL, "input": QUESTION, "stream": True, "prompt_cache_key": "codex-left"}
    with (
        httpx.Client(base_url=agent_service.url, timeout=10) as c,
        c.stream("POST", "/v1/responses", json=body) as r,
    ):
        for line in r.iter_lines():
            if "response.output_text.delta" in line:
                break
    (t,) = captured_session(agent_service.http, "codex-left")  # while upstream still holds
    reply.release.set()
    assert t["outcome"] == "error" and "disconnected" in t["error"]
    assert t["output"]["text"] == "one"
    deadline = time.monotonic() + 10
    while agent_service.responses.client_gone < 1:  # the upstream was hung up on
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_oversized_body_is_413_in_openai_shape(agent_service: AgentService) -> None:
    big = {"model": MODEL, "input": "x" * (300 * 1024)}
    r = agent_service.http.post("/v1/responses", json=big)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
    assert agent_service.responses.posts() == []
