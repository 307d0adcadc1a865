"""Adapter overhead: each framework call with its MetaClaw adapter against the same call without.

Run: .venv/bin/python benchmarks/integrations.py [--calls 400]

Every variant of a host call runs interleaved with the plain call (host, variant 1, variant 2,
..., host, ...) on one real engine (embedded LanceDB in a temporary directory, the real
all-MiniLM-L6-v2, three skills), with the frameworks' own fake models so only framework and
adapter time is measured. The tasks repeat, so after the warm-up every query embedding comes
from the engine's cache: the numbers are the steady-state cost of a call. The budget for an
adapter's added time is the core's own before_call + after_call on the same tasks plus 0.5 ms.
The "reference" rows show what the framework itself charges for any middleware, callback
handler, extra node or extra context, which the adapter pays too; "adapter's own" is the added
time less that framework share. The LangGraph graph has no
checkpointer, so every call is a thread's first turn (the skills message is placed by
rewriting the message list: the dearer path). Prints one table; paste it into
docs/benchmarks.md.
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
Group = tuple[Call, dict[str, Call]]  # the plain host call, and its variants by name
# For each adapter variant: the reference variants whose added time is the framework's share.
FRAMEWORK_SHARE = {
    "MetaClawMiddleware": ["reference: a no-op wrap_model_call middleware"],
    "MetaClawCallbackHandler": ["reference: a no-op callback handler"],
    "MetaClawMiddleware + MetaClawCallbackHandler": [
        "reference: a no-op wrap_model_call middleware",
        "reference: a no-op callback handler",
    ],
    "async MetaClawMiddleware + MetaClawCallbackHandler": [
        "reference: a no-op middleware + a no-op callback handler"
    ],
    "skills_node + capture(model node)": ["reference: a no-op node before the model node"],
    "SkillsPostprocessor + instrument()": [
        "reference: a postprocessor adding a node of the same text"
    ],
}


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


def model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.cycle(["Done."]))


def timed(fn: Call, task: str) -> float:
    start = time.perf_counter()
    fn(task)
    return (time.perf_counter() - start) * 1000.0


def measure(group: Group, calls: int) -> tuple[list[float], dict[str, list[float]]]:
    host, variants = group
    for task in TASKS * 3:  # warm up: lazy imports, caches, query embeddings
        host(task)
        for fn in variants.values():
            fn(task)
    plain: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(calls):
        task = TASKS[i % len(TASKS)]
        plain.append(timed(host, task))
        for name, fn in variants.items():
            times[name].append(timed(fn, task))
    return plain, times


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


def langchain_groups(engine: MetaClaw) -> dict[str, Group]:
    plain = create_agent(model(), [], system_prompt=SYSTEM)
    noop = create_agent(model(), [], system_prompt=SYSTEM, middleware=[NoopMiddleware()])
    adapted = create_agent(
        model(), [], system_prompt=SYSTEM, middleware=[MetaClawMiddleware(engine)]
    )
    handler = MetaClawCallbackHandler(engine)
    loop = asyncio.new_event_loop()  # one loop for every async call, as in a server

    def sync(agent: Any, config: dict[str, Any] | None = None) -> Call:
        return lambda task: agent.invoke({"messages": [HumanMessage(task)]}, config=config)

    def aio(agent: Any, config: dict[str, Any] | None = None) -> Call:
        return lambda task: loop.run_until_complete(
            agent.ainvoke({"messages": [HumanMessage(task)]}, config=config)
        )

    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{q}")])
    chain, injected = prompt | model(), prompt | skills_injector(engine) | model()
    return {
        "langchain create_agent, invoke": (
            sync(plain),
            {
                "reference: a no-op wrap_model_call middleware": sync(noop),
                "reference: a no-op callback handler": sync(plain, {"callbacks": [NoopHandler()]}),
                "MetaClawMiddleware": sync(adapted),
                "MetaClawCallbackHandler": sync(plain, {"callbacks": [handler]}),
                "MetaClawMiddleware + MetaClawCallbackHandler": sync(
                    adapted, {"callbacks": [handler]}
                ),
            },
        ),
        "langchain create_agent, ainvoke": (
            aio(plain),
            {
                "reference: a no-op middleware + a no-op callback handler": aio(
                    noop, {"callbacks": [NoopHandler()]}
                ),
                "async MetaClawMiddleware + MetaClawCallbackHandler": aio(
                    adapted, {"callbacks": [handler]}
                ),
            },
        ),
        "langchain LCEL prompt, model": (
            lambda task: chain.invoke({"q": task}),
            {
                "skills_injector + MetaClawCallbackHandler": lambda task: injected.invoke(
                    {"q": task}, config={"callbacks": [handler]}
                ),
            },
        ),
    }


def langgraph_groups(engine: MetaClaw) -> dict[str, Group]:
    chat = model()

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    def noop(state: MessagesState) -> dict[str, Any]:
        return {}

    def graph(first: Any | None, model_node: Any) -> Call:
        builder = StateGraph(MessagesState)
        builder.add_node("model", model_node)
        if first is None:
            builder.add_edge(START, "model")
        else:
            builder.add_node("first", first)
            builder.add_edge(START, "first")
            builder.add_edge("first", "model")
        builder.add_edge("model", END)
        compiled = builder.compile()
        return lambda t: compiled.invoke({"messages": [SystemMessage(SYSTEM), HumanMessage(t)]})

    mc = MetaClawGraph(engine)
    return {
        "langgraph StateGraph, invoke": (
            graph(None, call_model),
            {
                "reference: a no-op node before the model node": graph(noop, call_model),
                "skills_node + capture(model node)": graph(mc.skills_node, mc.capture(call_model)),
            },
        )
    }


def llamaindex_groups(engine: MetaClaw) -> dict[str, Group]:
    docs = [
        Document(text="Rust is a systems programming language."),
        Document(text="Python emphasises readability."),
    ]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))

    def query_engine(*postprocessors: Any) -> Any:
        return index.as_query_engine(
            llm=MockLLM(), similarity_top_k=2, node_postprocessors=list(postprocessors)
        )

    plain = query_engine()
    block = engine.before_call(CallContext(task=TASKS[2])).text
    padded = query_engine(FixedTextPostprocessor(text=block))
    adapted = query_engine(SkillsPostprocessor(engine))

    def captured(engine_: Any) -> Call:
        def call(task: str) -> Any:
            with instrument(engine):
                return engine_.query(task)

        return call

    return {
        "llamaindex VectorStoreIndex query engine, query": (
            plain.query,
            {
                "reference: a postprocessor adding a node of the same text": padded.query,
                "instrument() (capture only)": captured(plain),
                "SkillsPostprocessor + instrument()": captured(adapted),
            },
        )
    }


def rows(group: str, plain: list[float], times: dict[str, list[float]], budget: float) -> list[str]:
    out = []
    h50, h99 = np.percentile(plain, 50), np.percentile(plain, 99)
    added = {name: float(np.percentile(samples, 50)) - h50 for name, samples in times.items()}
    for name, samples in times.items():
        a50, a99 = np.percentile(samples, 50), np.percentile(samples, 99)
        framework = sum(max(0.0, added[r]) for r in FRAMEWORK_SHARE.get(name, []) if r in added)
        own = added[name] - framework
        if name.startswith("reference"):
            share, verdict = "", "(framework)"
        else:
            share = f"{own:+.2f}"
            verdict = "ok" if added[name] <= budget else ("ok (own)" if own <= budget else "over")
        out.append(
            f"| {group} | {name} | {h50:.2f} | {a50:.2f} | {added[name]:+.2f} | {share}"
            f" | {a50 / h50:.2f}x | {h99:.2f} | {a99:.2f} | {a99 - h99:+.2f} | {verdict} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="timed calls per variant")
    args = parser.parse_args()

    table: list[str] = []
    with tempfile.TemporaryDirectory(prefix="metaclaw-bench-") as home:
        engine = MetaClaw(Settings(home=home, load_entrypoints=False))
        try:
            assert engine.wait_ready(180), "the embedder did not load"
            engine.add_skills(SKILLS)
            core = core_cost(engine, args.calls)
            budget = float(np.percentile(core, 50)) + 0.5
            groups = {
                **langchain_groups(engine),
                **langgraph_groups(engine),
                **llamaindex_groups(engine),
            }
            for group_name, group in groups.items():
                table += rows(group_name, *measure(group, args.calls), budget)
            engine.flush()
        finally:
            engine.close()

    print(
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.calls} calls per variant, cached queries"
    )
    print(
        f"core before_call + after_call: p50 {np.percentile(core, 50):.2f} ms, "
        f"p99 {np.percentile(core, 99):.2f} ms; budget for an adapter's added p50: "
        f"{budget:.2f} ms\n"
    )
    print(
        "| host call | with | host p50 ms | with p50 | added p50 | adapter's own p50 |"
        " ratio p50 | host p99 | with p99 | added p99 | within budget |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
