"""A LlamaIndex query engine whose context carries MetaClaw's skills, its LLM calls captured.

    python examples/llamaindex_query.py

Offline by default: the LLM is a SCRIPTED stand-in (LlamaIndex's MockLLM, which answers with
the prompt it received, so you see exactly what the LLM got) and the index uses LlamaIndex's
MockEmbedding, so it runs anywhere in seconds. To use a real LLM, set METACLAW_MODEL (and
OPENAI_API_KEY, and OPENAI_BASE_URL for any OpenAI-compatible server); it is called through
the openai SDK.

It uses a temporary METACLAW_HOME unless one is set, seeds three skills, asks two questions of
a small VectorStoreIndex with `SkillsPostprocessor` (injection) and `instrument` (capture), and
prints what was injected and what was captured.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder ships in a package: no downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import (
    CompletionResponse,
    CompletionResponseGen,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from metaclaw_llamaindex import SKILLS_NODE_MARK, SkillsPostprocessor, instrument

from metaclaw_core import MetaClaw, Settings, Skill

SKILLS = [
    Skill(
        name="cite-documents",
        description="When answering a question from documents, cite the source document",
        body="Name the document each fact came from.",
    ),
    Skill(
        name="say-when-unknown",
        description="When the documents do not contain the answer to a question",
        body="Say that the documents do not say, rather than guessing.",
    ),
    Skill(
        name="weather-both-units",
        description="When reporting the weather or temperatures",
        body="Give temperatures in Celsius and Fahrenheit.",
    ),
]
DOCUMENTS = [
    Document(text="Rust is a systems programming language focused on safety.", doc_id="rust.md"),
    Document(text="Python is a programming language that emphasises readability.", doc_id="py.md"),
    Document(text="The Colosseum is an amphitheatre in the centre of Rome.", doc_id="rome.md"),
]
QUESTIONS = [
    "Which documents mention a programming language? Cite the source document.",
    "Who built the Colosseum? Answer from the documents only.",
]


class OpenAICompatibleLLM(CustomLLM):
    """A minimal LlamaIndex LLM over the openai SDK (any OpenAI-compatible server)."""

    model: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=False)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        from openai import OpenAI

        reply = OpenAI().chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": prompt}]
        )
        return CompletionResponse(text=reply.choices[0].message.content or "")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        def one() -> CompletionResponseGen:
            response = self.complete(prompt, formatted=formatted)
            yield CompletionResponse(text=response.text, delta=response.text)

        return one()


def choose_llm() -> tuple[Any, str]:
    name = os.environ.get("METACLAW_MODEL")
    if not name:
        return (
            MockLLM(),
            "SCRIPTED LLM (MockLLM echoes its prompt; set METACLAW_MODEL for a real one)",
        )
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("metaclaw example: set OPENAI_API_KEY (any value for a local server)")
    return OpenAICompatibleLLM(model=name), f"{name} (real, via the openai SDK)"


def main() -> None:
    if os.environ.get("METACLAW_HOME"):
        run(os.environ["METACLAW_HOME"])
    else:
        with tempfile.TemporaryDirectory(prefix="metaclaw-example-") as home:
            run(home)


def run(home: str) -> None:
    llm, label = choose_llm()  # first: a missing client package fails before any loading
    engine = MetaClaw(Settings(home=home))
    capture = instrument(engine, session_id="example-queries")  # captures every LLM call
    try:
        engine.wait_ready()
        live = {s.name for s in engine.library.live()}
        if missing := [s for s in SKILLS if s.name not in live]:
            engine.add_skills(missing, reason="example seed")
        print(f"MetaClaw home: {home}   skill generation: {engine.generation}")
        print(
            f"LLM: {label}\nEmbeddings: MockEmbedding (offline stand-in; all documents retrieved)\n"
        )

        index = VectorStoreIndex.from_documents(DOCUMENTS, embed_model=MockEmbedding(embed_dim=8))
        query_engine = index.as_query_engine(
            llm=llm,
            similarity_top_k=len(DOCUMENTS),
            node_postprocessors=[SkillsPostprocessor(engine)],  # adds the skills to the context
        )
        for question in QUESTIONS:
            response = query_engine.query(question)
            marked = [n for n in response.source_nodes if n.node.metadata.get(SKILLS_NODE_MARK)]
            injected = marked[0].node.metadata["skills"] if marked else "(none fitted)"
            print(f"QUESTION: {question}\nINJECTED: {injected}\nANSWER:\n{response}\n")

        engine.flush()
        print("=" * 30, "captured trajectories", "=" * 30)
        listed = engine.trajectories.recent(len(QUESTIONS), session_id="example-queries")
        for t in sorted(listed, key=lambda t: t.created_at):
            full = engine.trajectories.get(t.id)
            assert full is not None
            prompt = full.messages[-1].content if full.messages else ""
            has_block = "<metaclaw-skills>" in prompt
            print(
                f"generation {t.generation}  skills {t.injected_skills}  query {t.query!r}\n"
                f"  LLM got {len(prompt)} chars (skills block inside: {has_block}), "
                f"answered {len(full.output.text)} chars, {t.latency_ms or 0:.1f} ms"
            )
    finally:
        capture.close()
        engine.close()


if __name__ == "__main__":
    main()
