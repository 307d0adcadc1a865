"""Adapter overhead: each framework call with its MetaClaw adapter against the same call without.

Run: .venv/bin/python benchmarks/integrations.py [--calls 400]

Both variants of a host call run interleaved (A, B, A, B, ...) on the same real engine
(embedded LanceDB in a temporary directory, the real all-MiniLM-L6-v2, three skills), with the
frameworks' own fake models so only framework and adapter time is measured. The tasks repeat,
so after the first round every query embedding comes from the engine's cache: the numbers are
the steady-state cost of a call. The budget for an adapter's added time is the core's own
before_call + after_call on the same task plus 0.5 ms. The "reference" rows show what the
framework itself charges for any middleware or any extra node, which each adapter pays too.
The LangGraph graph has no checkpointer, so every call is a thread's first turn (the skills
message is placed by rewriting the message list: the dearer path). Prints one table; paste it
into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph import END, START, MessagesState, StateGraph
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from metaclaw_langchain import MetaClawCallbackHandler, MetaClawMiddleware, skills_injector
from metaclaw_langgraph import MetaClawGraph
from metaclaw_llamaindex import SkillsPostprocessor, instrument

from metaclaw_core import CallContext, Message, MetaClaw, ModelOutput, Settings, Skill

SYSTEM = "You are a careful assistant."
TASKS = [
    "What is 17 plus 25? Add the numbers.",
    "What's the weather like in Lisbon this week?",
    "Which documents mention a programming language? Cite the source document.",
    "Draft a polite email to the customer about the delay",
]
SKILLS = [
    Skill(
        name="arithmetic-with-tools",
        description="When asked to add or sum numbers, use the calculator tool",
        body="Always call the add tool for a sum instead of doing arithmetic in your head.",
    ),
    Skill(
        name="weather-both-units",
        description="When reporting the weather or temperatures",
        body="Give temperatures in Celsius and Fahrenheit.",
    ),
    Skill(
        name="cite-documents",
        description="When answering a question from documents, cite the source document",
        body="Name the document each fact came from.",
    ),
]

Call = Callable[[str], Any]


def model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.cycle(["Done."]))


def timed(fn: Call, task: str) -> float:
    start = time.perf_counter()
    fn(task)
    return (time.perf_counter() - start) * 1000.0


def compare(host: Call, adapted: Call, calls: int) -> tuple[list[float], list[float]]:
    for task in TASKS * 3:  # warm up: imports, caches, query embeddings
        host(task)
        adapted(task)
    a, b = [], []
    for i in range(calls):
        task = TASKS[i % len(TASKS)]
        a.append(timed(host, task))
        b.append(timed(adapted, task))
    return a, b


def core_cost(engine: MetaClaw, calls: int) -> list[float]:
    def call(task: str) -> None:
        ctx = CallContext(
            framework="bench",
            messages=[Message(role="system", content=SYSTEM), Message(role="user", content=task)],
        )
        engine.before_call(ctx)
        engine.after_call(ctx, ModelOutput(text="Done."))

    for task in TASKS * 3:
        call(task)
    return [timed(call, TASKS[i % len(TASKS)]) for i in range(calls)]


class NoopMiddleware(AgentMiddleware[Any, Any, Any]):
    """Reference: what LangChain charges for any middleware that wraps the model call."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class NoopHandler(BaseCallbackHandler):
    """Reference: what LangChain charges for any inline callback handler."""

    run_inline = True


class FixedTextPostprocessor(BaseNodePostprocessor):
    """Reference: a postprocessor adding a plain node of fixed text (the cost of more context)."""

    text: str

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=self.text), score=1.0), *nodes]


def langchain_cases(engine: MetaClaw) -> dict[str, tuple[Call, Call]]:
    plain_agent = create_agent(model(), [], system_prompt=SYSTEM)
    mw_agent = create_agent(
        model(), [], system_prompt=SYSTEM, middleware=[MetaClawMiddleware(engine)]
    )
    noop_agent = create_agent(model(), [], system_prompt=SYSTEM, middleware=[NoopMiddleware()])
    handler = MetaClawCallbackHandler(engine)
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{q}")])
    plain_chain = prompt | model()
    injected_chain = prompt | skills_injector(engine) | model()

    loop = asyncio.new_event_loop()  # one loop for all async calls, as in a server

    def agent_call(agent: Any, config: dict[str, Any] | None = None) -> Call:
        return lambda task: agent.invoke({"messages": [HumanMessage(task)]}, config=config)

    def async_call(agent: Any, config: dict[str, Any] | None = None) -> Call:
        return lambda task: loop.run_until_complete(
            agent.ainvoke({"messages": [HumanMessage(task)]}, config=config)
        )

    return {
        "reference: create_agent + a no-op wrap_model_call middleware": (
            agent_call(plain_agent),
            agent_call(noop_agent),
        ),
        "langchain: create_agent + MetaClawMiddleware": (
            agent_call(plain_agent),
            agent_call(mw_agent),
        ),
        "langchain: create_agent + MetaClawCallbackHandler": (
            agent_call(plain_agent),
            agent_call(plain_agent, {"callbacks": [handler]}),
        ),
        "reference: ainvoke + a no-op middleware and a no-op callback handler": (
            async_call(plain_agent),
            async_call(noop_agent, {"callbacks": [NoopHandler()]}),
        ),
        "langchain: ainvoke + MetaClawMiddleware and MetaClawCallbackHandler": (
            async_call(plain_agent),
            async_call(mw_agent, {"callbacks": [handler]}),
        ),
        "langchain: LCEL prompt, skills_injector, model (+ callback)": (
            lambda t: plain_chain.invoke({"q": t}),
            lambda t: injected_chain.invoke({"q": t}, config={"callbacks": [handler]}),
        ),
    }


def langgraph_cases(engine: MetaClaw) -> dict[str, tuple[Call, Call]]:
    chat = model()

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    def noop(state: MessagesState) -> dict[str, Any]:
        return {}

    plain = StateGraph(MessagesState)
    plain.add_node("model", call_model)
    plain.add_edge(START, "model")
    plain.add_edge("model", END)
    empty = StateGraph(MessagesState)
    empty.add_node("noop", noop)
    empty.add_node("model", call_model)
    empty.add_edge(START, "noop")
    empty.add_edge("noop", "model")
    empty.add_edge("model", END)
    mc = MetaClawGraph(engine)
    adapted = StateGraph(MessagesState)
    adapted.add_node("skills", mc.skills_node)
    adapted.add_node("model", mc.capture(call_model))
    adapted.add_edge(START, "skills")
    adapted.add_edge("skills", "model")
    adapted.add_edge("model", END)
    graphs = plain.compile(), empty.compile(), adapted.compile()

    def call(graph: Any) -> Call:
        return lambda t: graph.invoke({"messages": [SystemMessage(SYSTEM), HumanMessage(t)]})

    return {
        "reference: StateGraph + a no-op node": (call(graphs[0]), call(graphs[1])),
        "langgraph: skills node + captured model node": (call(graphs[0]), call(graphs[2])),
    }


def llamaindex_cases(engine: MetaClaw) -> tuple[dict[str, tuple[Call, Call]], Any]:
    docs = [
        Document(text="Rust is a systems programming language."),
        Document(text="Python emphasises readability."),
    ]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    plain = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    adapted = index.as_query_engine(
        llm=MockLLM(), similarity_top_k=2, node_postprocessors=[SkillsPostprocessor(engine)]
    )
    block = engine.before_call(CallContext(task=TASKS[2])).text
    padded = index.as_query_engine(
        llm=MockLLM(), similarity_top_k=2, node_postprocessors=[FixedTextPostprocessor(text=block)]
    )
    capture = instrument(engine)
    # The instrumentation sees every LlamaIndex call once registered, so the host variant runs
    # with it too; its own cost is measured separately below.
    return {
        "reference: query engine + a postprocessor adding a node of the same text": (
            plain.query,
            padded.query,
        ),
        "llamaindex: query engine + SkillsPostprocessor": (plain.query, adapted.query),
    }, (plain, capture)


def row(name: str, host: list[float], adapted: list[float], core: list[float]) -> str:
    p = {q: (np.percentile(host, q), np.percentile(adapted, q)) for q in (50, 99)}
    added50 = p[50][1] - p[50][0]
    added99 = p[99][1] - p[99][0]
    budget = float(np.percentile(core, 50)) + 0.5
    verdict = "ok" if added50 <= budget else "OVER"
    if name.startswith("reference"):
        verdict = "reference"
    return (
        f"| {name} | {p[50][0]:.2f} | {p[50][1]:.2f} | {added50:+.2f} | {p[50][1] / p[50][0]:.2f}x"
        f" | {p[99][0]:.2f} | {p[99][1]:.2f} | {added99:+.2f} | {budget:.2f} | {verdict} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="timed calls per variant")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="metaclaw-bench-") as home:
        engine = MetaClaw(Settings(home=home, load_entrypoints=False))
        try:
            assert engine.wait_ready(180), "the embedder did not load"
            engine.add_skills(SKILLS)
            core = core_cost(engine, args.calls)
            rows = []
            for name, (host, adapted) in langchain_cases(engine).items():
                rows.append(row(name, *compare(host, adapted, args.calls), core))
            for name, (host, adapted) in langgraph_cases(engine).items():
                rows.append(row(name, *compare(host, adapted, args.calls), core))
            cases, (plain, capture) = llamaindex_cases(engine)
            for name, (host, adapted) in cases.items():
                rows.append(row(name, *compare(host, adapted, args.calls), core))
            capture.close()
            with_capture, without = [], []
            for i in range(args.calls):  # instrument() alone: same query engine, on and off
                task = TASKS[i % len(TASKS)]
                without.append(timed(plain.query, task))
                capture = instrument(engine)
                with_capture.append(timed(plain.query, task))
                capture.close()
            rows.append(row("llamaindex: instrument() capture alone", without, with_capture, core))
            engine.flush()
        finally:
            engine.close()

    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.calls} calls per variant, cached queries"
    )
    print(
        f"core before_call + after_call: p50 {np.percentile(core, 50):.2f} ms, "
        f"p99 {np.percentile(core, 99):.2f} ms (budget for an adapter: core p50 + 0.5 ms)\n"
    )
    print(
        "| host call | host p50 ms | with adapter p50 | added p50 | ratio p50 | host p99 |"
        " with adapter p99 | added p99 | budget ms | |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
