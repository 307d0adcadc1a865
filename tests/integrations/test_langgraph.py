"""metaclaw-langgraph in a hand-built ``StateGraph`` with a checkpointer, over several turns."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from metaclaw_langgraph import SKILLS_MESSAGE_ID, MetaClawGraph, skills_message

from metaclaw_core import MetaClaw, Skill
from tests.integrations.conftest import ARITHMETIC_TASK, BLOCK_START, trajectories_of

SYSTEM_PROMPT = "You are a careful assistant."
TURNS = [
    ARITHMETIC_TASK,
    "Now add 10 and 20, sum them with the tool.",
    "What is the sum of 7 and 8? Add them.",
    "Add 1 and 1 for me, please.",
    "Sum 100 and 200 using addition.",
]
LATE_SKILL = Skill(
    name="show-the-addends",
    description="When adding or summing numbers, repeat the numbers being added",
    body="Say which numbers you add before giving the sum.",
)


class Recorder:
    """The model node: a fake chat model that records the messages each call saw."""

    def __init__(self, responses: list[Any] | None = None) -> None:
        self.model = GenericFakeChatModel(messages=itertools.cycle(responses or ["Done."]))
        self.received: list[list[BaseMessage]] = []

    def __call__(self, state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        self.received.append(list(state["messages"]))
        return {"messages": [self.model.invoke(state["messages"], config)]}


def build(
    engine: Any, node: Any, *, async_only: bool = False
) -> tuple[CompiledStateGraph[Any], MetaClawGraph]:
    mc = MetaClawGraph(engine)
    builder = StateGraph(MessagesState)
    builder.add_node("skills", mc.askills_node if async_only else mc.skills_node)
    builder.add_node("model", mc.capture(node))
    builder.add_edge(START, "skills")
    builder.add_edge("skills", "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=InMemorySaver()), mc


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"lg-{uuid.uuid4().hex[:8]}"}}


def run(graph: Any, value: Any, config: dict[str, Any], mode: str) -> Any:
    if mode == "async":
        return asyncio.run(graph.ainvoke(value, config))
    return graph.invoke(value, config)


def test_five_turns_keep_one_skills_message_and_stamp_each_trajectory_with_its_generation(
    engine: MetaClaw,
) -> None:
    recorder = Recorder()
    graph, _ = build(engine, recorder)
    config = thread()
    before = engine.generation
    expected_generations = []
    for turn, text in enumerate(TURNS):
        if turn == 2:
            engine.add_skills(LATE_SKILL)  # generation g -> g+1 mid-conversation
        expected_generations.append(engine.generation)
        first = [SystemMessage(SYSTEM_PROMPT)] if turn == 0 else []
        graph.invoke({"messages": [*first, HumanMessage(text)]}, config)

    assert expected_generations == [before, before, before + 1, before + 1, before + 1]
    state = graph.get_state(config).values["messages"]
    assert [m.id for m in state].count(SKILLS_MESSAGE_ID) == 1
    assert sum(BLOCK_START in str(m.content) for m in state) == 1
    assert state[0].content == SYSTEM_PROMPT and state[1].id == SKILLS_MESSAGE_ID
    assert len(state) == 2 + 2 * len(TURNS)
    assert "## show-the-addends" in str(skills_message(state).content)  # refreshed in place

    for seen in recorder.received:  # every model call saw exactly one skills block
        assert sum(BLOCK_START in str(m.content) for m in seen) == 1

    trajectories = trajectories_of(engine, config["configurable"]["thread_id"])
    assert len(trajectories) == 5
    assert [t.generation for t in trajectories] == expected_generations
    assert [t.framework for t in trajectories] == ["langgraph"] * 5
    assert all("arithmetic-with-tools" in t.injected_skills for t in trajectories)
    assert "show-the-addends" not in trajectories[1].injected_skills
    assert "show-the-addends" in trajectories[4].injected_skills
    for t, text in zip(trajectories, TURNS, strict=True):
        assert t.messages[-1].content == text
        assert [m.content for m in t.messages].count(SYSTEM_PROMPT) == 1
        assert t.output.text == "Done."


@pytest.mark.parametrize("async_only", [False, True])
def test_async_graph_injects_and_captures(engine: MetaClaw, async_only: bool) -> None:
    recorder = Recorder()

    async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        recorder.received.append(list(state["messages"]))
        return {"messages": [await recorder.model.ainvoke(state["messages"], config)]}

    graph, _ = build(engine, call_model, async_only=async_only)
    config = thread()
    for text in TURNS[:2]:
        run(graph, {"messages": [HumanMessage(text)]}, config, "async")
    state = graph.get_state(config).values["messages"]
    assert [m.id for m in state].count(SKILLS_MESSAGE_ID) == 1
    assert state[0].id == SKILLS_MESSAGE_ID  # no system prompt: the skills go first
    assert all(sum(BLOCK_START in str(m.content) for m in s) == 1 for s in recorder.received)
    assert len(trajectories_of(engine, config["configurable"]["thread_id"])) == 2


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_a_model_node_looping_through_tools_is_captured_on_every_call(engine: MetaClaw) -> None:
    call = {"name": "add", "args": {"a": 2, "b": 3}, "id": "call-1"}
    responses = itertools.cycle([AIMessage("", tool_calls=[call]), AIMessage("5")])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [next(responses).model_copy()]}

    mc = MetaClawGraph(engine)
    builder = StateGraph(MessagesState)
    builder.add_node("skills", mc.skills_node)
    builder.add_node("model", mc.capture(call_model))
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "skills")
    builder.add_edge("skills", "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"messages": [HumanMessage(ARITHMETIC_TASK)]}, config)

    first, second = trajectories_of(engine, config["configurable"]["thread_id"])
    assert first.output.tool_calls[0].name == "add"
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[-1].content == "5"
    assert second.output.text == "5"
    assert "arithmetic-with-tools" in first.injected_skills
    assert second.injected_skills == first.injected_skills  # same skills message, same stamp


def test_no_skills_message_when_no_skill_fits(
    minilm: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.integrations.conftest import new_engine

    empty = new_engine(minilm, tmp_path_factory.mktemp("empty"), [])
    try:
        graph, _ = build(empty, Recorder())
        config = thread()
        graph.invoke({"messages": [HumanMessage(ARITHMETIC_TASK)]}, config)
        state = graph.get_state(config).values["messages"]
        assert skills_message(state) is None
        assert len(trajectories_of(empty, config["configurable"]["thread_id"])) == 1
    finally:
        empty.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_engine_leaves_the_graph_result_unchanged(failing_engine: Any, mode: str) -> None:
    plain = StateGraph(MessagesState)
    plain.add_node("model", Recorder())
    plain.add_edge(START, "model")
    plain.add_edge("model", END)
    expected = run(plain.compile(), {"messages": [HumanMessage(ARITHMETIC_TASK)]}, {}, mode)

    recorder = Recorder()
    graph, _ = build(failing_engine, recorder)
    out = run(graph, {"messages": [HumanMessage(ARITHMETIC_TASK)]}, thread(), mode)

    assert [(type(m), m.content) for m in out["messages"]] == [
        (type(m), m.content) for m in expected["messages"]
    ]
    assert [m.content for m in recorder.received[0]] == [ARITHMETIC_TASK]
