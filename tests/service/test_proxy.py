"""The OpenAI-compatible proxy with the real ``openai`` SDK as client and the scripted server
as upstream: injection, capture, streaming pass-through, tool calls, usage, errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.service.conftest import Service, free_port
from tests.support.scripted_openai import Reply, ToolCallReply, error_reply

SKILL = {
    "name": "unit-conversion",
    "description": "Converting units of measure such as miles to kilometres",
    "body": "Show the conversion factor, then the result rounded to two decimals.",
}
QUESTION = "How many kilometres is 26.2 miles?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert a value between units",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "to": {"type": "string"}},
                "required": ["value", "to"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def proxy(service: Service) -> Service:
    r = service.http.post("/v1/skills", json={"skills": [SKILL]})
    assert r.status_code == 201, r.text
    return service


@pytest.fixture
def client(proxy: Service) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{proxy.url}/v1", api_key="client-key", max_retries=0, timeout=30
    ) as c:
        yield c


def captured(proxy: Service, session: str) -> list[dict[str, object]]:
    """Full trajectories of ``session`` (newest first), waiting for the capture to land."""
    deadline = time.monotonic() + 10
    while True:
        found = proxy.http.get("/v1/trajectories", params={"session_id": session}).json()
        if found or time.monotonic() > deadline:
            return [proxy.http.get(f"/v1/trajectories/{t['id']}").json() for t in found]
        time.sleep(0.05)


def test_completion_gets_skills_in_system_message_and_is_captured(
    proxy: Service, client: openai.OpenAI
) -> None:
    proxy.upstream.enqueue(
        Reply(
            "26.2 mi × 1.609 = 42.16 km",
            usage={"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
        )
    )
    resp = client.chat.completions.create(
        model="scripted-model",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": QUESTION},
        ],
        extra_headers={"X-MetaClaw-Session": "conv-1"},
    )
    assert resp.choices[0].message.content == "26.2 mi × 1.609 = 42.16 km"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens == 59

    sent = proxy.upstream.chat_requests()[-1].json
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are terse.\n\n")
    assert system["content"].rstrip().endswith("</metaclaw-skills>")
    assert "## unit-conversion" in system["content"]
    assert sent["messages"][1] == {"role": "user", "content": QUESTION}

    (t,) = captured(proxy, "conv-1")
    assert t["framework"] == "openai-proxy" and t["model"] == "scripted-model"
    assert t["injected_skills"] == ["unit-conversion"]
    assert t["output"]["text"] == "26.2 mi × 1.609 = 42.16 km"
    assert t["output"]["usage"]["total_tokens"] == 59
    assert "</metaclaw-skills>" in t["messages"][0]["content"]  # as the model saw it
    assert t["query"] == QUESTION


def test_request_without_system_message_gets_one_and_user_field_names_the_session(
    proxy: Service, client: openai.OpenAI
) -> None:
    proxy.upstream.enqueue(Reply("42.16 km"))
    client.chat.completions.create(
        model="scripted-model",
        messages=[{"role": "user", "content": QUESTION}],
        user="conv-user-field",
    )
    sent = proxy.upstream.chat_requests()[-1].json
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith("<metaclaw-skills>")
    assert sent["user"] == "conv-user-field"  # unknown-to-us fields pass through
    assert captured(proxy, "conv-user-field")[0]["injected_skills"] == ["unit-conversion"]


def test_unrelated_request_is_forwarded_byte_for_byte(
    proxy: Service, client: openai.OpenAI
) -> None:
    proxy.upstream.enqueue(Reply("hi"))
    raw = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "ok"}], "seed": 7}
    ).encode()
    r = proxy.http.post(
        "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200 and r.headers["x-metaclaw-skills"] == ""
    assert proxy.upstream.chat_requests()[-1].body == raw


def test_stream_is_passed_through_chunk_by_chunk(proxy: Service, client: openai.OpenAI) -> None:
    words = [f"w{i}" for i in range(8)]
    delay = 0.15
    proxy.upstream.enqueue(Reply(" ".join(words), chunk_delay_s=delay))
    started = time.monotonic()
    arrivals: list[tuple[float, str]] = []
    usage = None
    finish = None
    stream = client.chat.completions.create(
        model="scripted-model",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-MetaClaw-Session": "conv-stream"},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            if choice.delta.content:
                arrivals.append((time.monotonic() - started, choice.delta.content))
    assert "".join(text for _, text in arrivals) == " ".join(words)
    first, last = arrivals[0][0], arrivals[-1][0]
    # The upstream needs ≥ 7 × 0.15 s between the first and the last word: a proxy that
    # buffered the answer would deliver them together.
    assert last - first > 0.8, arrivals
    assert first < last / 3, arrivals
    assert finish == "stop" and usage is not None and usage.total_tokens > 0

    (t,) = captured(proxy, "conv-stream")
    assert t["output"]["text"] == " ".join(words)
    assert t["output"]["finish_reason"] == "stop"
    assert t["output"]["usage"]["total_tokens"] == usage.total_tokens
    assert t["metadata"]["stream"] is True and t["metadata"]["stream_done"] is True


def test_streamed_tool_calls_keep_ids_arguments_and_finish_reason(
    proxy: Service, client: openai.OpenAI
) -> None:
    args = json.dumps({"value": 26.2, "to": "km"})
    proxy.upstream.enqueue(Reply(None, tool_calls=[ToolCallReply("convert", args, id="call_7")]))
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(
        model="scripted-model",
        messages=[{"role": "user", "content": QUESTION}],
        tools=TOOLS,  # type: ignore[arg-type]
        stream=True,
        user="conv-tools-stream",
    ):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.id or ""
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
    assert calls == {0: {"id": "call_7", "name": "convert", "arguments": args}}
    assert finish == "tool_calls"
    assert proxy.upstream.chat_requests()[-1].json["tools"] == TOOLS

    (t,) = captured(proxy, "conv-tools-stream")
    assert t["output"]["tool_calls"] == [{"id": "call_7", "name": "convert", "arguments": args}]
    assert t["output"]["finish_reason"] == "tool_calls"


def test_tool_round_trip_without_streaming(proxy: Service, client: openai.OpenAI) -> None:
    args = json.dumps({"value": 26.2, "to": "km"})
    proxy.upstream.enqueue(
        Reply(None, tool_calls=[ToolCallReply("convert", args, id="call_1")]),
        Reply("It is 42.16 km."),
    )
    messages: list[dict[str, object]] = [{"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(
        model="scripted-model",
        messages=messages,
        tools=TOOLS,
        user="conv-tools",  # type: ignore[arg-type]
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "convert", args)  # type: ignore[union-attr]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_1", "content": "42.16"},
    ]
    second = client.chat.completions.create(
        model="scripted-model",
        messages=messages,
        tools=TOOLS,
        user="conv-tools",  # type: ignore[arg-type]
    )
    assert second.choices[0].message.content == "It is 42.16 km."
    newest = captured(proxy, "conv-tools")[0]
    roles = [m["role"] for m in newest["messages"]]  # type: ignore[index]
    assert roles == ["system", "user", "assistant", "tool"]
    assistant = newest["messages"][2]  # type: ignore[index]
    assert assistant["tool_calls"][0]["name"] == "convert"
    assert newest["messages"][3]["tool_call_id"] == "call_1"  # type: ignore[index]


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [
        (error_reply(429, "slow down", type="rate_limit_error"), openai.RateLimitError),
        (error_reply(400, "bad model", code="model_not_found"), openai.BadRequestError),
        (error_reply(503, "overloaded", type="server_error"), openai.InternalServerError),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_status_and_body(
    proxy: Service,
    client: openai.OpenAI,
    reply: Reply,
    error_type: type[openai.APIStatusError],
    stream: bool,
) -> None:
    proxy.upstream.enqueue(reply)
    session = f"conv-error-{reply.status}-{stream}"
    with pytest.raises(error_type) as info:
        client.chat.completions.create(
            model="scripted-model",
            messages=[{"role": "user", "content": QUESTION}],
            stream=stream,
            user=session,
        )
    assert info.value.status_code == reply.status
    assert info.value.body == reply.error["error"]  # type: ignore[index]
    (t,) = captured(proxy, session)
    assert t["outcome"] == "error" and str(reply.status) in t["error"]  # type: ignore[operator]


def test_unreachable_upstream_is_502_and_captured(proxy: Service, client: openai.OpenAI) -> None:
    settings = proxy.settings.proxy
    saved = settings.upstream_base_url
    settings.upstream_base_url = f"http://127.0.0.1:{free_port()}/v1"
    try:
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTION}], user="conv-down"
            )
    finally:
        settings.upstream_base_url = saved
    assert info.value.status_code == 502
    assert "ConnectError" in info.value.message
    assert captured(proxy, "conv-down")[0]["outcome"] == "error"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"not json", None),
        (b"[]", None),
        (b'{"model": "m"}', "messages"),
        (b'{"model": "m", "messages": []}', "messages"),
        (b'{"model": "m", "messages": ["hi"]}', "messages[0]"),
        (b'{"model": "m", "messages": [{"content": "hi"}]}', "messages[0].role"),
        (b'{"model": 3, "messages": [{"role": "user", "content": "hi"}]}', "model"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "stream"),
    ],
)
def test_bad_chat_payloads_are_400_before_anything_is_sent(
    proxy: Service, body: bytes, param: str | None
) -> None:
    before = len(proxy.upstream.chat_requests())
    r = proxy.http.post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"]
    assert r.json()["error"].get("param") == param
    assert len(proxy.upstream.chat_requests()) == before


def test_models_come_from_upstream(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["scripted-model"]


def test_slow_upstream_does_not_block_other_requests(proxy: Service) -> None:
    proxy.upstream.enqueue(Reply("late", delay_s=1.5))
    done = threading.Event()

    def slow_call() -> None:
        proxy.http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "a new question " * 3}]},
        )
        done.set()

    threading.Thread(target=slow_call, daemon=True).start()
    time.sleep(0.2)
    with httpx.Client(base_url=proxy.url, timeout=5) as other:
        for _ in range(5):
            t0 = time.monotonic()
            assert other.get("/healthz").status_code == 200
            assert time.monotonic() - t0 < 0.5
            inj = other.post("/v1/inject", json={"task": f"convert {time.time()} miles"})
            assert inj.status_code == 200
    assert not done.is_set()  # the slow call was in flight all along
    assert done.wait(10)


def test_client_leaving_mid_stream_is_captured_as_an_error(proxy: Service) -> None:
    proxy.upstream.enqueue(Reply("one two three four five six", chunk_delay_s=0.2))
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "user": "conv-left",
    }
    with (
        httpx.Client(base_url=proxy.url, timeout=10) as c,
        c.stream("POST", "/v1/chat/completions", json=body) as r,
    ):
        for line in r.iter_lines():
            if '"content": "one"' in line or '"content":"one"' in line:
                break
    (t,) = captured(proxy, "conv-left")
    assert t["outcome"] == "error" and "disconnected" in t["error"]  # type: ignore[operator]
    assert t["output"]["text"].startswith("one")  # type: ignore[index]
