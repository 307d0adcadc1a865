"""A LangChain agent that uses the skills MetaClaw learned, and whose runs MetaClaw captures.

    python examples/langchain_agent.py

Offline by default: the model is a SCRIPTED chat model (LangChain's own fake chat model
replaying a tool call and an answer per task), so it runs anywhere in seconds. To use a real
model, set METACLAW_MODEL (and OPENAI_API_KEY, and OPENAI_BASE_URL for any OpenAI-compatible
server); that path needs `pip install langchain-openai`.

It uses a temporary METACLAW_HOME unless one is set, seeds three skills, runs two tasks through
`create_agent` with `MetaClawMiddleware` (injection) and `MetaClawCallbackHandler` (capture),
and prints what was injected and what was captured.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder ships in a package: no downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from metaclaw_langchain import MetaClawCallbackHandler, MetaClawMiddleware

from metaclaw_core import MetaClaw, Settings, Skill

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
TASKS = ["What is 17 plus 25?", "What's the weather like in Paris today?"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def weather(city: str) -> str:
    """Current weather for a city (a canned answer in this example)."""
    return f"{city}: sunny, 18 °C"


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, able to bind tools: it replays ``responses`` in order."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def scripted_model() -> ScriptedChatModel:
    def call(name: str, args: dict[str, Any], i: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}])

    return ScriptedChatModel(
        responses=[
            call("add", {"a": 17, "b": 25}, 1),
            AIMessage("17 plus 25 is 42."),
            call("weather", {"city": "Paris"}, 2),
            AIMessage("Paris is sunny, 18 °C (64 °F)."),
        ]
    )


def choose_model() -> tuple[Any, str]:
    name = os.environ.get("METACLAW_MODEL")
    if not name:
        return scripted_model(), "SCRIPTED chat model (offline; set METACLAW_MODEL for a real one)"
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        sys.exit(
            "metaclaw example: METACLAW_MODEL is set but langchain-openai is not installed; "
            "run `pip install langchain-openai`, or unset METACLAW_MODEL to run offline"
        )
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("metaclaw example: set OPENAI_API_KEY (any value for a local server)")
    return ChatOpenAI(model=name, base_url=os.environ.get("OPENAI_BASE_URL")), f"{name} (real)"


def main() -> None:
    if os.environ.get("METACLAW_HOME"):
        run(os.environ["METACLAW_HOME"])
    else:
        with tempfile.TemporaryDirectory(prefix="metaclaw-example-") as home:
            run(home)


def run(home: str) -> None:
    model, label = choose_model()  # first: a missing client package fails before any loading
    engine = MetaClaw(Settings(home=home))
    try:
        engine.wait_ready()
        live = {s.name for s in engine.library.live()}
        if missing := [s for s in SKILLS if s.name not in live]:
            engine.add_skills(missing, reason="example seed")
        print(f"MetaClaw home: {home}   skill generation: {engine.generation}")
        print(f"Model: {label}\n")

        agent = create_agent(
            model,
            [add, weather],
            system_prompt="You are a helpful assistant. Use the tools you have.",
            middleware=[MetaClawMiddleware(engine)],  # injects the skills before each model call
        )
        handler = MetaClawCallbackHandler(engine)  # captures each run as one trajectory
        for task in TASKS:
            out = agent.invoke(
                {"messages": [("user", task)]},
                config={"callbacks": [handler], "configurable": {"thread_id": "example"}},
            )
            print(f"USER:  {task}\nAGENT: {out['messages'][-1].content}\n")

        engine.flush()
        print("=" * 30, "captured trajectories", "=" * 30)
        for listed in reversed(engine.trajectories.recent(len(TASKS), session_id="example")):
            t = engine.trajectories.get(listed.id)
            assert t is not None
            print(f"\ntrajectory {t.id}  generation {t.generation}  skills {t.injected_skills}")
            print(f"system prompt the model saw:\n{t.messages[0].content}\n")
            for m in t.messages[1:]:
                calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
                print(f"  {m.role:9} {m.content or ''}{' -> ' + calls if calls else ''}")
            print(f"  {'output':9} {t.output.text}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
