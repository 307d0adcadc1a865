"""A hand-built LangGraph graph whose state carries MetaClaw's skills, its model node captured.

    python examples/langgraph_graph.py

Offline by default: the model node calls a SCRIPTED chat model (LangChain's own fake chat
model replaying canned answers), so it runs anywhere in seconds. To use a real model, set
METACLAW_MODEL (and OPENAI_API_KEY, and OPENAI_BASE_URL for any OpenAI-compatible server);
that path needs `pip install langchain-openai`.

It uses a temporary METACLAW_HOME unless one is set, seeds two skills, talks three turns in one
checkpointed thread, adds a third skill between turns (a new generation), and prints the skills
message in the state and the captured trajectories with their generations.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder ships in a package: no downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from metaclaw_langgraph import MetaClawGraph, skills_message

from metaclaw_core import MetaClaw, Settings, Skill

SKILLS = [
    Skill(
        name="weather-both-units",
        description="When reporting the weather or temperatures",
        body="Give temperatures in Celsius and Fahrenheit.",
    ),
    Skill(
        name="packing-lists",
        description="When helping someone pack for a trip",
        body="Answer with a short bulleted list, most important item first.",
    ),
]
LATER_SKILL = Skill(
    name="travel-weather-advice",
    description="When the weather matters for a trip or for what to wear",
    body="Mention rain gear whenever rain is possible.",
)
TURNS = [
    "What's the weather like in Lisbon this week?",
    "What should I pack for three days there?",
    "Will it rain on Saturday? What should I wear?",
]
SCRIPT = [
    "Lisbon: sunny, 24 °C (75 °F) most days.",
    "- passport\n- light clothes\n- sunscreen",
    "Showers are possible on Saturday, 19 °C (66 °F): bring a light rain jacket.",
]


def choose_model() -> tuple[Any, str]:
    name = os.environ.get("METACLAW_MODEL")
    if not name:
        model = GenericFakeChatModel(messages=itertools.cycle(SCRIPT))
        return model, "SCRIPTED chat model (offline; set METACLAW_MODEL for a real one)"
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

        def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        mc = MetaClawGraph(engine)
        builder = StateGraph(MessagesState)
        builder.add_node("skills", mc.skills_node)  # puts the skills into the state
        builder.add_node("model", mc.capture(call_model))  # captures each model call
        builder.add_edge(START, "skills")
        builder.add_edge("skills", "model")
        builder.add_edge("model", END)
        graph = builder.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "example-thread"}}

        for turn, text in enumerate(TURNS):
            if turn == 2:
                engine.add_skills(LATER_SKILL, reason="learned between turns")
                print(f"-- added skill {LATER_SKILL.name!r}: generation {engine.generation}\n")
            first = [SystemMessage("You are a concise travel assistant.")] if turn == 0 else []
            out = graph.invoke({"messages": [*first, HumanMessage(text)]}, config)
            print(f"USER:  {text}\nAGENT: {out['messages'][-1].content}\n")

        state = graph.get_state(config).values["messages"]
        print("=" * 25, f"thread state: {len(state)} messages", "=" * 25)
        for m in state:
            first_line = str(m.content).splitlines()[0] if m.content else ""
            print(f"  {m.type:6} {'[skills] ' if m.id == mc.message_id else ''}{first_line}")
        skills = skills_message(state)
        print(f"\nthe one skills message (id {mc.message_id!r}) now holds:\n{skills.content}\n")

        engine.flush()
        print("=" * 30, "captured trajectories", "=" * 30)
        listed = engine.trajectories.recent(len(TURNS), session_id="example-thread")
        for t in sorted(listed, key=lambda t: t.created_at):
            print(f"generation {t.generation}  skills {t.injected_skills}  query {t.query!r}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
