"""``/v1/messages`` with the real ``anthropic`` SDK as client and a scripted Anthropic upstream:
skills at the end of ``system`` with the client's cache breakpoints intact, streaming event by
event, tool use, headers, unknown shapes passed through, errors in Anthropic's shape, and
calls that fail half-way captured as errors while the service keeps serving."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from pydantic import SecretStr

from metaclaw_core.plugins.render import BLOCK_START
from tests.service.conftest import AgentService, captured_session
from tests.support.scripted_http import RecordedRequest, ScriptedCall, ScriptedReply

QUESTION = "How many kilometres is 26.2 miles?"
MODEL = "claude-scripted"
TOOLS = [
    {
        "name": "convert",
        "description": "Convert a value between units",
        "input_schema": {
            "type": "object",
            "properties": {"value": {"type": "number"}, "to": {"type": "string"}},
            "required": ["value", "to"],
        },
    }
]


@pytest.fixture
def client(agent_service: AgentService) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=agent_service.url, api_key="sk-ant-client", max_retries=0, timeout=30
    ) as c:
        yield c


def sent(svc: AgentService) -> dict[str, Any]:
    body: dict[str, Any] = svc.anthropic.posts()[-1].json
    return body


def test_string_system_gets_the_block_at_its_end_and_the_call_is_captured(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    agent_service.anthropic.enqueue(
        ScriptedReply("26.2 mi × 1.609 = 42.16 km", usage={"input_tokens": 40, "output_tokens": 9})
    )
    msg = client.messages.create(
        model=MODEL,
        max_tokens=100,
        system="You are terse.",
        messages=[{"role": "user", "content": QUESTION}],
        metadata={"user_id": "claude-session-1"},
    )
    assert msg.content[0].type == "text" and msg.content[0].text == "26.2 mi × 1.609 = 42.16 km"
    assert msg.stop_reason == "end_turn" and msg.usage.output_tokens == 9

    system = sent(agent_service)["system"]
    assert system.startswith("You are terse.\n\n" + BLOCK_START)
    assert "## unit-conversion" in system

    (t,) = captured_session(agent_service.http, "claude-session-1")
    assert t["framework"] == "anthropic-proxy" and t["model"] == MODEL
    assert t["injected_skills"] == ["unit-conversion"] and t["query"] == QUESTION
    assert t["generation"] == agent_service.engine.generation
    assert t["output"]["text"] == "26.2 mi × 1.609 = 42.16 km"
    assert t["output"]["usage"] == {"input_tokens": 40, "output_tokens": 9}
    assert t["output"]["finish_reason"] == "end_turn"
    assert BLOCK_START in t["messages"][0]["content"]  # as the model saw it
    assert t["latency_ms"] > 0 and t["outcome"] == "unknown"


def test_cache_control_blocks_stay_byte_for_byte_and_the_block_is_never_repeated(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Main prompt " * 50, "cache_control": {"type": "ephemeral"}},
    ]
    agent_service.anthropic.enqueue(ScriptedReply("first"), ScriptedReply("second"))
    client.messages.create(
        model=MODEL,
        max_tokens=50,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": QUESTION}],
    )
    first = agent_service.anthropic.posts()[-1]
    got = first.json["system"]
    assert got[:3] == system  # the client's blocks, breakpoints included, untouched
    assert got[3]["type"] == "text" and got[3]["text"].startswith(BLOCK_START)
    assert "cache_control" not in got[3]
    # The serialised prefix up to the last breakpoint is the client's own bytes.
    prefix = json.dumps(system, ensure_ascii=False)[:-1]
    assert prefix in first.body.decode()

    # A client that sends back what it was given (block included) gets one block, not two.
    client.messages.create(
        model=MODEL,
        max_tokens=50,
        system=got,
        messages=[{"role": "user", "content": QUESTION}],
    )
    again = sent(agent_service)["system"]
    assert again == got
    assert json.dumps(again).count(BLOCK_START) == 1


def test_stream_reaches_the_client_event_by_event(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    reply = ScriptedReply("one two three four five", hold_after_events=4)
    agent_service.anthropic.enqueue(reply)
    events: list[str] = []
    text: list[str] = []
    with client.messages.stream(
        model=MODEL,
        max_tokens=50,
        messages=[{"role": "user", "content": QUESTION}],
        metadata={"user_id": "claude-stream"},
    ) as stream:
        for event in stream:
            events.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
                # The upstream holds the rest until the client has this first word: a proxy
                # that buffered would leave both waiting.
                reply.release.set()
        final = stream.get_final_message()
    assert not reply.held_too_long
    assert "".join(text) == "one two three four five"
    for kind in ("message_start", "content_block_start", "content_block_stop", "message_stop"):
        assert kind in events
    assert final.stop_reason == "end_turn"

    (t,) = captured_session(agent_service.http, "claude-stream")
    assert t["output"]["text"] == "one two three four five"
    assert t["output"]["finish_reason"] == "end_turn" and t["output"]["usage"]["output_tokens"]
    assert t["metadata"]["stream"] is True and t["metadata"]["stream_done"] is True
    assert t["error"] is None


def test_streamed_tool_use_round_trip_is_captured_with_calls_and_results(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    call = ScriptedCall("convert", {"value": 26.2, "to": "km"}, id="toolu_7")
    agent_service.anthropic.enqueue(
        ScriptedReply(None, tool_calls=[call], thinking="Use the tool."), ScriptedReply("42.16 km")
    )
    meta = {"user_id": "claude-tools"}
    with client.messages.stream(
        model=MODEL,
        max_tokens=50,
        tools=TOOLS,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": QUESTION}],
        metadata=meta,  # type: ignore[arg-type]
    ) as stream:
        first = stream.get_final_message()
    kinds = [b.type for b in first.content]
    assert kinds == ["thinking", "tool_use"] and first.stop_reason == "tool_use"
    use = first.content[1]
    assert use.type == "tool_use" and use.input == {"value": 26.2, "to": "km"}
    assert sent(agent_service)["tools"] == TOOLS

    history: list[Any] = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": "42.16"}],
        },
    ]
    second = client.messages.create(
        model=MODEL,
        max_tokens=50,
        tools=TOOLS,  # type: ignore[arg-type]
        messages=history,
        metadata=meta,  # type: ignore[arg-type]
    )
    assert second.content[0].type == "text" and second.content[0].text == "42.16 km"
    # The thinking block (with its signature) went back upstream as the client sent it.
    assert sent(agent_service)["messages"][1]["content"][0]["type"] == "thinking"
    assert sent(agent_service)["messages"][1]["content"][0]["signature"] == "sig"

    newest, oldest = captured_session(agent_service.http, "claude-tools", n=2)
    assert oldest["output"]["tool_calls"] == [
        {"id": "toolu_7", "name": "convert", "arguments": json.dumps({"value": 26.2, "to": "km"})}
    ]
    assert oldest["output"]["finish_reason"] == "tool_use"
    roles = [m["role"] for m in newest["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert newest["messages"][2]["tool_calls"][0]["name"] == "convert"
    assert newest["messages"][3] == {
        "role": "tool",
        "content": "42.16",
        "name": None,
        "tool_calls": [],
        "tool_call_id": "toolu_7",
    }
    assert newest["query"] == QUESTION  # the tool result is not the user's words


def test_claude_code_shapes_pass_through_untouched_and_the_query_is_the_users_text(
    agent_service: AgentService,
) -> None:
    """Claude Code's wrappers: a <system-reminder> block before the user's words, a
    ``role: "system"`` message inside ``messages``, unknown blocks and top-level fields."""
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<system-reminder>\nToday is 2026-12-01.\n</system-reminder>",
                },
                {"type": "text", "text": QUESTION, "cache_control": {"type": "ephemeral"}},
                {"type": "mystery_block", "payload": {"keep": [1, 2, 3]}},
            ],
        },
        {"role": "system", "content": "Extra context the client sends " * 20},
    ]
    body = {
        "model": MODEL,
        "max_tokens": 50,
        "messages": messages,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        "metadata": {"user_id": "claude-shapes"},
        "stream": False,
    }

    def expect(req: RecordedRequest) -> None:
        got = req.json
        assert got["messages"] == messages
        for key in ("thinking", "output_config", "context_management", "metadata"):
            assert got[key] == body[key], key
        assert req.path == "/v1/messages?beta=true"

    agent_service.anthropic.expect = expect
    agent_service.anthropic.enqueue(ScriptedReply("42.16 km"))
    r = agent_service.http.post(
        "/v1/messages?beta=true",
        json=body,
        headers={"x-api-key": "sk-ant-client", "anthropic-version": "2023-06-01"},
    )
    assert r.status_code == 200, r.text
    assert agent_service.anthropic.failures == []
    (t,) = captured_session(agent_service.http, "claude-shapes")
    assert t["query"] == QUESTION and t["injected_skills"] == ["unit-conversion"]
    assert t["metadata"]["path"] == "/v1/messages"


def test_client_headers_are_forwarded_and_a_configured_key_wins(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    agent_service.anthropic.enqueue(ScriptedReply("a"), ScriptedReply("b"), ScriptedReply("c"))
    client.messages.create(
        model=MODEL,
        max_tokens=5,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    h = agent_service.anthropic.posts()[-1].headers
    # This SDK sends its key as a bearer token; Claude Code sends x-api-key (below).
    assert h["authorization"] == "Bearer sk-ant-client"
    assert (
        h["anthropic-version"]
        == anthropic.Anthropic(api_key="k").default_headers["anthropic-version"]
    )
    assert h["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    r = agent_service.http.post(
        "/v1/messages",
        json={"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-api-key": "sk-ant-cli", "anthropic-version": "2023-06-01"},
    )
    assert r.status_code == 200
    h = agent_service.anthropic.posts()[-1].headers
    assert h["x-api-key"] == "sk-ant-cli" and h["anthropic-version"] == "2023-06-01"

    proxy = agent_service.settings.proxy
    proxy.anthropic_api_key = SecretStr("sk-ant-from-settings")
    try:
        client.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        proxy.anthropic_api_key = None
    h = agent_service.anthropic.posts()[-1].headers
    assert h["x-api-key"] == "sk-ant-from-settings" and "authorization" not in h


def test_count_tokens_is_passed_through(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    result = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}]
    )
    assert result.input_tokens > 0
    req = agent_service.anthropic.requests[-1]
    assert req.path == "/v1/messages/count_tokens" and BLOCK_START.encode() not in req.body


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_status_and_anthropic_body(
    agent_service: AgentService, client: anthropic.Anthropic, stream: bool
) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    agent_service.anthropic.enqueue(ScriptedReply(status=429, error=error))
    session = f"claude-429-{stream}"
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "user", "content": QUESTION}],
            stream=stream,
            metadata={"user_id": session},
        )
    assert info.value.status_code == 429 and info.value.body == error
    (t,) = captured_session(agent_service.http, session)
    assert t["outcome"] == "error" and "429" in t["error"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"not json", "JSON"),
        (b"[]", "object"),
        (b'{"model": "m"}', "messages"),
        (b'{"model": "m", "messages": []}', "messages"),
        (b'{"model": "m", "messages": ["hi"]}', "messages.0"),
        (b'{"model": "m", "messages": [{"content": "hi"}]}', "messages.0.role"),
        (b'{"model": "m", "messages": [{"role": "user", "content": 7}]}', "messages.0.content"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "system": 3}', "system"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    ],
)
def test_malformed_bodies_are_400_in_anthropic_shape_before_anything_is_sent(
    agent_service: AgentService, body: bytes, where: str
) -> None:
    r = agent_service.http.post(
        "/v1/messages", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    data = r.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    assert where in data["error"]["message"]
    assert agent_service.anthropic.posts() == []


def test_a_200_mb_body_is_refused_in_anthropic_shape_without_being_read(
    agent_service: AgentService,
) -> None:
    host, port = agent_service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 209715200\r\n\r\n" + b"{" * 1024
        )
        raw = b""
        while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
            part = s.recv(65536)
            if not part:
                break
            raw += part
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    data = json.loads(payload)
    assert data["type"] == "error" and data["error"]["type"] == "request_too_large"
    assert "max_request_bytes" in data["error"]["message"]

    def chunks() -> Iterator[bytes]:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"x" * 16384

    r = agent_service.http.post("/v1/messages", content=chunks())  # chunked, no length
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
    assert agent_service.anthropic.posts() == []
    assert agent_service.http.get("/healthz").status_code == 200


def test_upstream_dropping_mid_stream_is_an_error_event_and_an_error_capture(
    agent_service: AgentService, client: anthropic.Anthropic
) -> None:
    agent_service.anthropic.enqueue(ScriptedReply("one two three four", drop_after_events=5))
    text: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(
            model=MODEL,
            max_tokens=50,
            messages=[{"role": "user", "content": QUESTION}],
            metadata={"user_id": "claude-drop"},
        ) as stream,
    ):
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
    assert "upstream stream broke" in str(info.value.message)
    assert text == ["one", " two"]
    (t,) = captured_session(agent_service.http, "claude-drop")
    assert t["outcome"] == "error" and "stream broke" in t["error"]
    assert t["output"]["text"] == "one two"
    assert t["metadata"]["stream_done"] is False
    # Still serving.
    agent_service.anthropic.enqueue(ScriptedReply("fine"))
    again = client.messages.create(
        model=MODEL, max_tokens=5, messages=[{"role": "user", "content": QUESTION}]
    )
    assert again.content[0].type == "text" and again.content[0].text == "fine"


def test_client_leaving_mid_stream_closes_upstream_and_is_captured_as_an_error(
    agent_service: AgentService,
) -> None:
    reply = ScriptedReply("one two three four five six seven eight", hold_after_events=4)
    agent_service.anthropic.enqueue(reply)
    body = {
        "model": MODEL,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "metadata": {"user_id": "claude-left"},
    }
    with (
        httpx.Client(base_url=agent_service.url, timeout=10) as c,
        c.stream("POST", "/v1/messages", json=body) as r,
    ):
        for line in r.iter_lines():
            if '"text_delta"' in line:
                break
    # Captured while the upstream still holds the rest: the proxy noticed the client leave.
    (t,) = captured_session(agent_service.http, "claude-left")
    reply.release.set()
    assert t["outcome"] == "error" and "disconnected" in t["error"]
    assert t["output"]["text"] == "one"
    wait_for(lambda: agent_service.anthropic.client_gone >= 1)  # the upstream was hung up on


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_no_anthropic_upstream_is_503_in_anthropic_shape(agent_service: AgentService) -> None:
    proxy = agent_service.settings.proxy
    saved, proxy.anthropic_base_url = proxy.anthropic_base_url, None
    try:
        r = agent_service.http.post(
            "/v1/messages", json={"messages": [{"role": "user", "content": "hi"}]}
        )
    finally:
        proxy.anthropic_base_url = saved
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "api_error"
    assert "METACLAW_PROXY__ANTHROPIC_BASE_URL" in r.json()["error"]["message"]


def test_a_fault_while_adding_the_block_fails_open_byte_for_byte(
    agent_service: AgentService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metaclaw_core.service import anthropic_proxy

    def broken(body: dict[str, Any], injection: Any) -> dict[str, Any]:
        raise RuntimeError("a bug in the block placement")

    monkeypatch.setattr(
        anthropic_proxy,
        "MESSAGES",
        dataclasses.replace(anthropic_proxy.MESSAGES, apply_injection=broken),
    )
    before = dict(agent_service.engine.faults.counts)
    raw = json.dumps(
        {
            "model": MODEL,
            "max_tokens": 5,
            "system": "You are terse.",
            "messages": [{"role": "user", "content": QUESTION}],
            "metadata": {"user_id": "claude-fail-open"},
        }
    ).encode()
    agent_service.anthropic.enqueue(ScriptedReply("42.16 km"))
    r = agent_service.http.post(
        "/v1/messages", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "42.16 km"
    assert agent_service.anthropic.posts()[-1].body == raw  # as the client sent it
    assert agent_service.engine.faults.counts.get("anthropic-proxy injection", 0) == (
        before.get("anthropic-proxy injection", 0) + 1
    )
    assert r.headers["x-metaclaw-skills"] == ""
    (t,) = captured_session(agent_service.http, "claude-fail-open")
    assert t["output"]["text"] == "42.16 km"
    assert t["injected_skills"] == [] and t["query"] == QUESTION  # what really happened
