"""The scripted OpenAI-compatible server other suites build on does what it promises."""

from __future__ import annotations

import time

import openai
import pytest

from tests.support.scripted_openai import (
    Reply,
    ScriptedOpenAI,
    ToolCallReply,
    error_reply,
)


def test_replays_the_script_in_order_and_records_requests() -> None:
    with ScriptedOpenAI([Reply("one"), Reply("two")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        for expected in ("one", "two"):
            r = client.chat.completions.create(
                model="judge", messages=[{"role": "user", "content": expected}]
            )
            assert r.choices[0].message.content == expected
            assert r.model == "judge"
        with pytest.raises(openai.InternalServerError, match="no reply left"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert [r.json["messages"][0]["content"] for r in server.chat_requests()] == [
            "one",
            "two",
            "x",
        ]
        assert server.requests[0].headers["authorization"] == "Bearer k"


def test_responder_and_default_answer_dynamically() -> None:
    def judge(req):  # type: ignore[no-untyped-def]
        text = req.json["messages"][-1]["content"]
        return Reply("1" if "good" in text else "-1")

    with ScriptedOpenAI(responder=judge) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")

        def ask(text: str) -> str | None:
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": text}]
            )
            return r.choices[0].message.content

        assert (ask("a good answer"), ask("a poor one")) == ("1", "-1")
    with ScriptedOpenAI(default=Reply("always")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        assert (
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "?"}])
            .choices[0]
            .message.content
            == "always"
        )


def test_streams_with_delays_tool_calls_usage_and_errors() -> None:
    with ScriptedOpenAI(chunk_delay_s=0.1) as server:
        server.enqueue(
            Reply("a b c", usage={"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}),
            Reply(None, tool_calls=[ToolCallReply("lookup", '{"q": "x"}', id="c1")]),
            error_reply(429, "slow down", type="rate_limit_error"),
        )
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        t0 = time.monotonic()
        times, usage = [], None
        for chunk in client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        ):
            usage = chunk.usage or usage
            if chunk.choices and chunk.choices[0].delta.content:
                times.append(time.monotonic() - t0)
        assert len(times) == 3 and times[-1] - times[0] >= 0.19
        assert usage is not None and usage.total_tokens == 6

        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        call = r.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert (call.id, call.function.name) == ("c1", "lookup")  # type: ignore[union-attr]
        assert r.choices[0].finish_reason == "tool_calls"

        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert info.value.body == {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": None,
        }
        assert [m.id for m in client.models.list().data] == ["scripted-model"]
