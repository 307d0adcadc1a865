"""The adapters take the agent: LangChain (middleware, injector, callback), LangGraph (per node
and per run config) and LlamaIndex; each agent gets its own skills and its own trajectories."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph import END, START, MessagesState, StateGraph
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import MockLLM
from metaclaw_langchain import MetaClawCallbackHandler, MetaClawMiddleware, skills_injector
from metaclaw_langgraph import MetaClawGraph
from metaclaw_llamaindex import SkillsPostprocessor, instrument

from metaclaw_core import MetaClaw, Skill
from metaclaw_core.embeddings import LoadedEmbedder
from tests.integrations.conftest import BLOCK_START, new_engine, trajectories_of

TASK = "Book a table for four at an Italian restaurant tonight"
BOOKING = Skill(
    name="confirm-bookings",
    description="When booking a table, a room or a ticket for someone",
    body="Repeat the date, time and number of people before you book.",
)


@pytest.fixture(scope="module")
def engine(minilm: LoadedEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetaClaw]:
    engine = new_engine(minilm, tmp_path_factory.mktemp("agents"), [])
    engine.library_of("concierge").add(BOOKING)
    yield engine
    engine.close()


def session() -> str:
    return f"ag-{uuid.uuid4().hex[:8]}"


def model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage("Booked.")] * 10))


def system_of(messages: list[Any]) -> str:
    return "".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


def test_langchain_middleware_and_injector_take_the_agent(engine: MetaClaw) -> None:
    for agent, expected in (("concierge", True), (None, False), ("other", False)):
        sid = session()
        agent_app = create_agent(
            model(),
            [],
            system_prompt="Be helpful.",
            middleware=[MetaClawMiddleware(engine, agent=agent)],
        )
        agent_app.invoke({"messages": [("user", TASK)]}, {"configurable": {"thread_id": sid}})
        (t,) = trajectories_of(engine, sid)
        assert ("confirm-bookings" in t.injected_skills) is expected, agent
        assert t.agent == (agent or "default")
    # the injector, and the agent given in the run's metadata instead of as a parameter
    chain = ChatPromptTemplate.from_messages([("system", "Be helpful."), ("user", "{q}")])
    sid = session()
    handler = MetaClawCallbackHandler(engine)
    prompt = (chain | skills_injector(engine)).invoke(
        {"q": TASK},
        {"callbacks": [handler], "metadata": {"metaclaw_agent": "concierge", "session_id": sid}},
    )
    assert BLOCK_START in system_of(
        prompt.to_messages() if hasattr(prompt, "to_messages") else prompt
    )
    plain = (chain | skills_injector(engine, agent="other")).invoke({"q": TASK})
    assert BLOCK_START not in system_of(
        plain.to_messages() if hasattr(plain, "to_messages") else plain
    )


def test_langgraph_sub_agents_each_learn_for_themselves(engine: MetaClaw) -> None:
    mc = MetaClawGraph(engine)
    seen: dict[str, list[Any]] = {}

    def node(name: str) -> Any:
        def call(state: MessagesState) -> dict[str, Any]:
            seen[name] = list(state["messages"])
            return {"messages": [AIMessage(f"{name} done.")]}

        return call

    concierge = mc.for_agent("concierge")
    builder = StateGraph(MessagesState)
    builder.add_node("concierge_skills", concierge.skills_node)
    builder.add_node("concierge", concierge.capture(node("concierge")))
    builder.add_node("planner_skills", mc.for_agent("planner").skills_node)
    builder.add_node("planner", mc.for_agent("planner").capture(node("planner")))
    builder.add_edge(START, "concierge_skills")
    builder.add_edge("concierge_skills", "concierge")
    builder.add_edge("concierge", "planner_skills")
    builder.add_edge("planner_skills", "planner")
    builder.add_edge("planner", END)
    sid = session()
    builder.compile().invoke({"messages": [("user", TASK)]}, {"configurable": {"thread_id": sid}})
    assert BLOCK_START in system_of(seen["concierge"])
    assert BLOCK_START not in system_of(seen["planner"])  # the concierge's skill is not its
    got = {t.agent: t for t in trajectories_of(engine, sid)}
    assert set(got) == {"concierge", "planner"}
    assert got["concierge"].injected_skills == ["confirm-bookings"]
    assert got["planner"].injected_skills == []
    # the agent from the run's config, for a graph built without naming one
    g = StateGraph(MessagesState)
    g.add_node("skills", mc.skills_node)
    g.add_node("model", mc.capture(node("any")))
    g.add_edge(START, "skills")
    g.add_edge("skills", "model")
    g.add_edge("model", END)
    sid = session()
    g.compile().invoke(
        {"messages": [("user", TASK)]},
        {"configurable": {"thread_id": sid}, "metadata": {"metaclaw_agent": "concierge"}},
    )
    (t,) = trajectories_of(engine, sid)
    assert t.agent == "concierge" and t.injected_skills == ["confirm-bookings"]


def test_llamaindex_postprocessor_and_capture_take_the_agent(engine: MetaClaw) -> None:
    docs = [Document(text="Trattoria Roma seats eight.", doc_id="roma")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    with instrument(engine):
        for agent, expected in (("concierge", True), ("other", False)):
            sid = session()
            with instrument_tags({"session_id": sid}):
                qe = index.as_query_engine(
                    llm=MockLLM(), node_postprocessors=[SkillsPostprocessor(engine, agent=agent)]
                )
                answer = str(qe.query(TASK))
            assert (BLOCK_START in answer) is expected
            (t,) = trajectories_of(engine, sid)
            assert t.agent == agent  # the capture is the agent's the skills were chosen for
