"""`metaclaw demo`: the fast loop end to end on the embedded defaults, offline.

It seeds the packaged demo skills, sends a few tasks through the engine with a scripted
stand-in for the LLM (clearly labelled: the point is what MetaClaw injects and captures, not
the answers), records feedback, adds a skill as a new generation, and shows that the next
call is served from it.
"""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from metaclaw_core.config import Settings
from metaclaw_core.engine import MetaClaw
from metaclaw_core.models import CallContext, Message, ModelOutput, Skill

SYSTEM = "You are a helpful assistant working in the user's project folder."
TASKS = [
    "Schedule the design review for 9:30 tomorrow and log it in meetings.log",
    "Delete the old build artefacts in dist/ and tmp/",
    "What does src/parser.py do?",
    "Give me a short progress report on the migration",
    "hi!",
]
NEW_SKILL = Skill(
    name="check-units-in-numbers",
    description="Use when a task involves quantities, prices, sizes or durations.",
    body="State the unit of every number you write (ms, MB, EUR, ...) and convert to the unit "
    "the user asked for before answering.",
    source="demo",
)
FOLLOW_UP = "State the price in EUR and the size in MB of each package"


def scripted_model(messages: list[Message]) -> ModelOutput:
    """A stand-in for an LLM: echoes which skills it was shown. Not a model."""
    system = messages[0].content if messages and messages[0].role == "system" else ""
    shown = [line[3:] for line in system.splitlines() if line.startswith("## ")]
    return ModelOutput(
        text=f"(scripted reply; skills in prompt: {', '.join(shown) or 'none'})",
        finish_reason="stop",
    )


def demo_skills_dir() -> Path:
    return Path(str(resources.files("metaclaw_core") / "demo_skills"))


def run_demo(home: Path | None = None, console: Console | None = None) -> dict[str, object]:
    console = console or Console()
    tmp = None
    if home is None:
        tmp = tempfile.TemporaryDirectory(prefix="metaclaw-demo-")
        home = Path(tmp.name)
    console.print(f"[bold]metaclaw demo[/bold]  home: {home}  (model: scripted stand-in)")
    engine = MetaClaw(Settings(home=home))
    try:
        t0 = time.perf_counter()
        engine.wait_ready()
        console.print(
            f"embedder ready in {time.perf_counter() - t0:.1f}s: "
            f"{engine.status()['embedding_model']}"
        )
        if not engine.library.live():
            seeded = engine.import_skills(demo_skills_dir(), strict=True)
            number = seeded.generation.number if seeded.generation else 0
            console.print(f"seeded {len(seeded.live)} skills -> generation {number}")

        ids: list[str] = []
        for i, task in enumerate([*TASKS, TASKS[0]]):
            ids.append(_call(engine, console, task, session="demo", repeat=i == len(TASKS)))

        engine.feedback(ids[0], 1.0, detail="the ISO timestamp was right")
        engine.feedback(ids[2], -1.0, detail="described a file it did not open")
        console.print("recorded feedback: +1 on call 1, -1 on call 3")

        gen = engine.add_skills(NEW_SKILL, reason="demo: a new rule goes live")
        console.print(
            f"added skill [cyan]{NEW_SKILL.name}[/cyan] -> generation {gen.number}; "
            "the next call is served from it at once"
        )
        ids.append(_call(engine, console, FOLLOW_UP, session="demo", repeat=False))

        engine.flush()
        table = Table(title="captured trajectories (newest first)")
        for col in ("id", "gen", "injected", "latency ms", "reward", "query"):
            table.add_column(col)
        recent = engine.trajectories.recent(limit=len(ids))
        for t in recent:
            table.add_row(
                t.id[:8],
                str(t.generation),
                ", ".join(t.injected_skills) or "-",
                f"{t.latency_ms:.1f}" if t.latency_ms is not None else "-",
                f"{t.reward:+.0f}" if t.reward is not None else "-",
                t.query[:48],
            )
        console.print(table)
        status = engine.status()
        console.print(
            f"generation {status['generation']}, {status['live_skills']} live skills, "
            f"{status['trajectories']} trajectories stored, faults: {status['faults'] or 'none'}"
        )
        return {"trajectories": len(recent), "generation": status["generation"], "home": str(home)}
    finally:
        engine.close()
        if tmp is not None:
            tmp.cleanup()


def _call(engine: MetaClaw, console: Console, task: str, *, session: str, repeat: bool) -> str:
    ctx = CallContext(
        framework="demo",
        session_id=session,
        model="scripted",
        messages=[Message(role="system", content=SYSTEM), Message(role="user", content=task)],
    )
    t0 = time.perf_counter()
    injection = engine.before_call(ctx)
    inject_ms = (time.perf_counter() - t0) * 1000
    seen = [
        Message(role="system", content=injection.apply_to_system(SYSTEM)),
        *ctx.messages[1:],
    ]
    output = scripted_model(seen)
    ctx.messages = seen
    t1 = time.perf_counter()
    tid = engine.after_call(ctx, output, injection=injection)
    capture_ms = (time.perf_counter() - t1) * 1000
    chosen = ", ".join(f"{s.skill.name} ({s.score:.2f})" for s in injection.skills) or "none"
    note = "  [dim](same task again: query embedding cached)[/dim]" if repeat else ""
    console.print(
        Panel(
            f"[bold]task:[/bold] {task}\n[bold]injected:[/bold] {chosen}\n"
            f"[bold]before_call:[/bold] {inject_ms:.2f} ms   [bold]after_call:[/bold] "
            f"{capture_ms:.2f} ms   generation {injection.generation}{note}\n"
            f"[bold]model:[/bold] {output.text}",
            title=f"call -> trajectory {str(tid)[:8]}",
            expand=False,
        )
    )
    return tid or ""
