"""metaclaw-langchain with real ``create_agent`` runs, LCEL chains and LangChain's fake models."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from metaclaw_langchain import MetaClawCallbackHandler, MetaClawMiddleware, skills_injector
from pydantic import Field

from metaclaw_core import MetaClaw
from tests.integrations.conftest import ARITHMETIC_TASK, BLOCK_START, trajectories_of

SYSTEM_PROMPT = "You are a careful assistant."


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model (cycles its responses), able to bind tools, recording inputs."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tool_using_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call-1"}]),
            AIMessage("2 plus 3 is 5."),
        ]
    )


def run(runnable: Any, value: Any, config: dict[str, Any], mode: str) -> Any:
    if mode == "async":
        return asyncio.run(runnable.ainvoke(value, config=config))
    return runnable.invoke(value, config=config)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"lc-{uuid.uuid4().hex[:8]}"}}


def session_of(config: dict[str, Any]) -> str:
    return str(config["configurable"]["thread_id"])


def summary(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """The host-visible result of a run, without generated ids."""
    return [
        (
            type(m).__name__,
            m.content,
            [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])],
        )
        for m in messages
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_middleware_puts_skills_at_end_of_system_message_and_captures_each_model_call(
    engine: MetaClaw, mode: str
) -> None:
    model = tool_using_model()
    agent = create_agent(
        model, [add], system_prompt=SYSTEM_PROMPT, middleware=[MetaClawMiddleware(engine)]
    )
    config = thread()
    out = run(agent, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, config, mode)

    assert out["messages"][-1].content == "2 plus 3 is 5."
    assert len(model.received) == 2
    for seen in model.received:
        system = seen[0]
        assert isinstance(system, SystemMessage)
        assert system.content.startswith(SYSTEM_PROMPT)
        assert system.content.count(BLOCK_START) == 1
        assert system.content.rstrip().endswith("</metaclaw-skills>")
        assert "## arithmetic-with-tools" in system.content

    first, second = trajectories_of(engine, session_of(config))
    for t in (first, second):
        assert t.framework == "langchain"
        assert "arithmetic-with-tools" in t.injected_skills
        assert t.generation == engine.generation
        assert BLOCK_START in t.messages[0].content
    assert [(c.name, c.arguments) for c in first.output.tool_calls] == [("add", '{"a": 2, "b": 3}')]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[2].tool_calls[0].id == "call-1"
    assert second.messages[3].tool_call_id == "call-1"
    assert second.messages[3].content == "5"
    assert second.output.text == "2 plus 3 is 5."


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_callback_captures_one_trajectory_per_agent_run_with_tool_calls_and_results(
    engine: MetaClaw, mode: str
) -> None:
    agent = create_agent(tool_using_model(), [add], system_prompt=SYSTEM_PROMPT)
    config = {**thread(), "callbacks": [MetaClawCallbackHandler(engine)]}
    run(agent, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, config, mode)

    (t,) = trajectories_of(engine, session_of(config))
    assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool"]
    assert t.messages[1].content == ARITHMETIC_TASK
    assert t.messages[2].tool_calls[0].name == "add"
    assert (t.messages[3].tool_call_id, t.messages[3].content) == ("call-1", "5")
    assert t.output.text == "2 plus 3 is 5."
    assert t.metadata["model_calls"] == 2
    assert t.metadata["tool_runs"] == 1
    assert t.injected_skills == []  # the callback only observes


def test_middleware_and_callback_together_store_one_trajectory_stamped_with_the_skills(
    engine: MetaClaw,
) -> None:
    model = tool_using_model()
    agent = create_agent(
        model, [add], system_prompt=SYSTEM_PROMPT, middleware=[MetaClawMiddleware(engine)]
    )
    config = {**thread(), "callbacks": [MetaClawCallbackHandler(engine)]}
    run(agent, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, config, "sync")

    (t,) = trajectories_of(engine, session_of(config))
    assert "arithmetic-with-tools" in t.injected_skills
    assert t.generation == engine.generation
    assert BLOCK_START in t.messages[0].content
    assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_skills_injector_puts_skills_into_an_lcel_chain(engine: MetaClaw, mode: str) -> None:
    model = ScriptedChatModel(responses=[AIMessage("5")])
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM_PROMPT), ("human", "{question}")])
    chain = prompt | skills_injector(engine) | model
    session = f"chain-{uuid.uuid4().hex[:8]}"
    config = {"metadata": {"session_id": session}, "callbacks": [MetaClawCallbackHandler(engine)]}
    out = run(chain, {"question": ARITHMETIC_TASK}, config, mode)

    assert out.content == "5"
    system, human = model.received[0]
    assert system.content.startswith(SYSTEM_PROMPT)
    assert "## arithmetic-with-tools" in system.content
    assert human.content == ARITHMETIC_TASK
    (t,) = trajectories_of(engine, session)
    assert "arithmetic-with-tools" in t.injected_skills
    assert t.output.text == "5"


def test_skills_injector_adds_a_system_message_to_a_bare_prompt(engine: MetaClaw) -> None:
    model = ScriptedChatModel(responses=[AIMessage("5")])
    (skills_injector(engine) | model).invoke(ARITHMETIC_TASK)
    system, human = model.received[0]
    assert isinstance(system, SystemMessage) and system.content.startswith(BLOCK_START)
    assert human.content == ARITHMETIC_TASK


def test_callback_captures_a_plain_chat_model_call(engine: MetaClaw) -> None:
    model = ScriptedChatModel(responses=[AIMessage("Sunny, 20 °C (68 °F).")])
    handler = MetaClawCallbackHandler(engine, session_id=f"plain-{uuid.uuid4().hex[:8]}")
    model.invoke([HumanMessage("What's the weather in Paris?")], config={"callbacks": [handler]})

    (t,) = trajectories_of(engine, str(handler.session_id))
    assert [m.role for m in t.messages] == ["user"]
    assert t.output.text == "Sunny, 20 °C (68 °F)."


def test_a_failing_model_call_is_captured_with_its_error_and_the_error_reaches_the_host(
    engine: MetaClaw,
) -> None:
    class FailingModel(ScriptedChatModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("provider down")

    agent = create_agent(
        FailingModel(responses=[AIMessage("")]),
        [add],
        middleware=[MetaClawMiddleware(engine)],
    )
    config = thread()
    with pytest.raises(ConnectionError, match="provider down"):
        agent.invoke({"messages": [HumanMessage(ARITHMETIC_TASK)]}, config=config)
    (t,) = trajectories_of(engine, session_of(config))
    assert t.error == "ConnectionError: provider down"
    assert t.outcome == "error"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_engine_leaves_the_agent_result_unchanged(failing_engine: Any, mode: str) -> None:
    plain = create_agent(tool_using_model(), [add], system_prompt=SYSTEM_PROMPT)
    expected = run(plain, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, thread(), mode)

    model = tool_using_model()
    agent = create_agent(
        model, [add], system_prompt=SYSTEM_PROMPT, middleware=[MetaClawMiddleware(failing_engine)]
    )
    config = {**thread(), "callbacks": [MetaClawCallbackHandler(failing_engine)]}
    out = run(agent, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, config, mode)

    assert summary(out["messages"]) == summary(expected["messages"])
    assert model.received[0][0].content == SYSTEM_PROMPT  # nothing injected


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_engine_leaves_the_chain_result_unchanged(failing_engine: Any, mode: str) -> None:
    model = ScriptedChatModel(responses=[AIMessage("5")])
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM_PROMPT), ("human", "{question}")])
    chain = prompt | skills_injector(failing_engine) | model
    config = {"callbacks": [MetaClawCallbackHandler(failing_engine)]}
    out = run(chain, {"question": ARITHMETIC_TASK}, config, mode)

    assert out.content == "5"
    assert [m.content for m in model.received[0]] == [SYSTEM_PROMPT, ARITHMETIC_TASK]
