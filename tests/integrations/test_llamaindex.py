"""metaclaw-llamaindex with a real ``VectorStoreIndex`` query engine (MockEmbedding, MockLLM)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import QueryBundle
from metaclaw_llamaindex import SKILLS_NODE_MARK, SkillsPostprocessor, instrument

from metaclaw_core import MetaClaw
from tests.integrations.conftest import BLOCK_START, trajectories_of

QUESTION = "Which documents mention a programming language? Cite the source document for each."
DOCS = [
    Document(text="The Eiffel tower is in Paris, on the Champ de Mars.", doc_id="paris"),
    Document(text="Rust is a systems programming language.", doc_id="rust"),
    Document(text="The Colosseum is an amphitheatre in Rome.", doc_id="rome"),
]


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(DOCS, embed_model=MockEmbedding(embed_dim=8))


@pytest.fixture
def session() -> Iterator[str]:
    name = f"li-{uuid.uuid4().hex[:8]}"
    with instrument_tags({"session_id": name}):
        yield name


@pytest.fixture(scope="module")
def captured(engine: MetaClaw) -> Iterator[Any]:
    capture = instrument(engine)
    yield capture
    capture.close()


def query_engine(index: VectorStoreIndex, llm: Any, *postprocessors: Any) -> Any:
    # MockEmbedding makes every document equally similar: retrieve them all.
    return index.as_query_engine(
        llm=llm, similarity_top_k=len(DOCS), node_postprocessors=list(postprocessors)
    )


def query(query_engine: Any, text: str, mode: str) -> Any:
    if mode == "async":
        return asyncio.run(query_engine.aquery(text))
    return query_engine.query(text)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_query_engine_context_gets_the_skills_and_the_llm_call_is_captured(
    engine: MetaClaw, index: VectorStoreIndex, captured: Any, session: str, mode: str
) -> None:
    # MockLLM answers with its prompt, so the answer shows exactly what the LLM received.
    qe = query_engine(index, MockLLM(), SkillsPostprocessor(engine))
    response = query(qe, QUESTION, mode)

    prompt = str(response)
    assert prompt.count(BLOCK_START) == 1
    assert "## cite-documents" in prompt
    assert "Rust is a systems programming language." in prompt
    assert SKILLS_NODE_MARK + ": skills" not in prompt  # the marks are hidden from the LLM
    marked = [n for n in response.source_nodes if n.node.metadata.get(SKILLS_NODE_MARK)]
    assert len(marked) == 1 and response.source_nodes[0] is marked[0]
    assert "cite-documents" in marked[0].node.metadata["skills"]
    assert marked[0].node.metadata["generation"] == engine.generation

    (t,) = trajectories_of(engine, session)
    assert t.framework == "llamaindex"
    assert "cite-documents" in t.injected_skills
    assert t.generation == engine.generation
    assert t.query == QUESTION
    assert BLOCK_START in t.messages[-1].content and QUESTION in t.messages[-1].content
    assert t.output.text == prompt


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_chat_llm_call_made_through_complete_is_captured_once(
    engine: MetaClaw, index: VectorStoreIndex, captured: Any, session: str, mode: str
) -> None:
    # MockLLM's chat() calls its complete(): two LLM events, one call.
    llm = MockLLM(is_chat_model=True)
    qe = query_engine(index, llm, SkillsPostprocessor(engine))
    query(qe, QUESTION, mode)
    llm.chat([ChatMessage(role="user", content="Tell me about Rome.")])

    in_query, direct = trajectories_of(engine, session)
    assert [m.role for m in in_query.messages] == ["system", "user"]
    assert "cite-documents" in in_query.injected_skills
    assert BLOCK_START in in_query.messages[1].content
    assert [m.content for m in direct.messages] == ["Tell me about Rome."]
    assert direct.injected_skills == []  # outside any query


def test_a_failing_llm_call_is_captured_with_its_error(
    engine: MetaClaw, index: VectorStoreIndex, captured: Any, session: str
) -> None:
    class DownLLM(MockLLM):
        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            raise ConnectionError("provider down")

    qe = query_engine(index, DownLLM(), SkillsPostprocessor(engine))
    with pytest.raises(ConnectionError):
        qe.query(QUESTION)
    (t,) = trajectories_of(engine, session)
    assert t.error == "ConnectionError: provider down"
    assert "cite-documents" in t.injected_skills


def test_the_postprocessor_alone_marks_the_skills_node(engine: MetaClaw) -> None:
    nodes = SkillsPostprocessor(engine).postprocess_nodes([], QueryBundle(QUESTION))
    (node,) = nodes
    assert node.node.metadata[SKILLS_NODE_MARK] == "skills"
    assert node.node.get_content().startswith(BLOCK_START)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_engine_leaves_the_query_result_unchanged(
    failing_engine: Any, index: VectorStoreIndex, mode: str
) -> None:
    expected = query(query_engine(index, MockLLM()), QUESTION, mode)
    with instrument(failing_engine):
        qe = query_engine(index, MockLLM(), SkillsPostprocessor(failing_engine))
        response = query(qe, QUESTION, mode)
    assert str(response) == str(expected)
    assert [n.node.node_id for n in response.source_nodes] == [
        n.node.node_id for n in expected.source_nodes
    ]
