"""The ``metaclaw`` command line (typer + rich). ``--json`` output is stable: see docs/cli.md."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from metaclaw_core.cli_support import AgentOpt, JsonOpt
from metaclaw_core.cli_support import Guard as _Guard
from metaclaw_core.cli_support import fail as _fail
from metaclaw_core.cli_support import generation_json as _generation_json
from metaclaw_core.cli_support import print_json as _print_json
from metaclaw_core.cli_support import read_only_engine as _engine
from metaclaw_core.cli_support import skill_json as _skill_json
from metaclaw_core.models import CallContext, Message, Skill, Trajectory

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Make your agent learn from its own traffic."
)
skills_app = typer.Typer(no_args_is_help=True, help="The skill library.")
traj_app = typer.Typer(no_args_is_help=True, help="Captured trajectories.")
app.add_typer(skills_app, name="skills")
app.add_typer(traj_app, name="trajectories")

out = Console()


@app.callback()
def _root(
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data directory (default $METACLAW_HOME or ~/.metaclaw)."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what happens.")] = False,
) -> None:
    if home is not None:
        os.environ["METACLAW_HOME"] = str(home)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


# -- skills ------------------------------------------------------------------------------
@skills_app.command("list")
def skills_list(
    as_json: JsonOpt = False,
    all_versions: Annotated[bool, typer.Option("--all", help="Include retired versions.")] = False,
    agent: AgentOpt = None,
) -> None:
    """List the agent's live skills and the shared skills it receives (scope column)."""
    with _Guard(), _engine() as engine:
        lib = engine.library_of(agent)
        own = lib.all_versions() if all_versions else lib.live()
        received = lib.received()
        skills = sorted(own + received, key=lambda s: (s.name, s.generation_added or 0))
        if as_json:
            _print_json(
                {
                    "agent": lib.agent,
                    "generation": lib.current_generation(),
                    "skills": [_skill_json(s) for s in skills],
                }
            )
            return
        title = f"skills of {lib.agent} (generation {lib.current_generation()})"
        table = Table(title=title)
        for col in ("name", "scope", "category", "added", "retired", "description"):
            table.add_column(col)
        for s in skills:
            scope = "own" if s.agent == lib.agent else f"from {s.agent}"
            if s.shared:
                scope += ", shared" + (f" with {', '.join(s.groups)}" if s.groups else "")
            table.add_row(
                s.name,
                scope,
                s.category or "",
                str(s.generation_added),
                str(s.generation_retired or ""),
                s.description,
            )
        out.print(table)


@skills_app.command("show")
def skills_show(name: str, as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Show one live skill as SKILL.md."""
    with _Guard(), _engine() as engine:
        lib = engine.library_of(agent)
        found = [s for s in lib.received() if s.name == name]
        skill = found[0] if found and name not in {s.name for s in lib.live()} else lib.get(name)
        if as_json:
            _print_json(_skill_json(skill))
        else:
            from metaclaw_core.skills.skillmd import dump_skill_md

            out.print(dump_skill_md(skill), highlight=False, markup=False)


@skills_app.command("add")
def skills_add(
    name: Annotated[str | None, typer.Argument(help="Slug name (omit with --file).")] = None,
    description: Annotated[str | None, typer.Option("--description", "-d")] = None,
    body: Annotated[str | None, typer.Option("--body", "-b")] = None,
    category: Annotated[str | None, typer.Option("--category")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A SKILL.md file.")] = None,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Add one skill (from options or a SKILL.md file): a new generation."""
    with _Guard():
        if file is not None:
            from metaclaw_core.skills.skillmd import parse_skill_md

            skill = parse_skill_md(file.read_text(encoding="utf-8"), path=file, source="manual")
        else:
            if not (name and description and body):
                _fail("give NAME --description ... --body ..., or --file SKILL.md")
            try:
                skill = Skill(
                    name=name or "",
                    description=description or "",
                    body=body or "",
                    category=category,
                )
            except ValidationError as exc:
                first = exc.errors()[0]
                _fail(f"{first['loc'][0]}: {first['msg'].removeprefix('Value error, ')}")
                return
        with _engine(embedder=True) as engine:
            gen = engine.library_of(agent).add(skill, reason=f"add {skill.name}")
        if as_json:
            _print_json({"generation": _generation_json(gen), "skill": _skill_json(skill)})
        else:
            out.print(f"added {skill.name} -> generation {gen.number}")


@skills_app.command("import")
def skills_import(
    directory: Path,
    replace: Annotated[bool, typer.Option("--replace", help="Update skills already live.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="All or nothing: import only if every file passes.")
    ] = False,
    allow_flagged: Annotated[
        bool,
        typer.Option(
            "--allow-flagged",
            help="Admit skills the review holds for a person (you are that person); "
            "rejected ones stay out.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Import <name>/SKILL.md folders: a verdict per file; exits 1 if any was held back."""
    with _Guard(), _engine(embedder=True) as engine:
        report = engine.library_of(agent).import_dir(
            directory, replace=replace, strict=strict, allow_flagged=allow_flagged
        )
        if as_json:
            _print_json(report.to_json())
        else:
            for name in report.live:
                out.print(f"live         {name}", highlight=False, markup=False)
            # what was held back goes to stderr, one line each (plain: rich would wrap paths)
            for name, review in report.quarantined.items():
                sys.stderr.write(f"quarantined  {name}: {'; '.join(review.reasons())}\n")
            for name, reasons in report.rejected.items():
                sys.stderr.write(f"rejected     {name}: {'; '.join(reasons)}\n")
            gen = report.generation
            out.print(
                f"imported {len(report.live)} of "
                f"{len(report.live) + len(report.quarantined) + len(report.rejected)}"
                + (f" -> generation {gen.number}" if gen else "")
                + (
                    f"; {len(report.quarantined)} wait in `metaclaw skills pending`"
                    if report.quarantined
                    else ""
                )
                + (f"; {len(report.rejected)} refused" if report.rejected else "")
            )
    if report.held_back:
        raise typer.Exit(1)


@skills_app.command("export")
def skills_export(directory: Path, as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Write the agent's live skills as <name>/SKILL.md folders."""
    with _Guard(), _engine() as engine:
        paths = engine.library_of(agent).export_dir(directory)
        if as_json:
            _print_json({"written": [str(p) for p in paths]})
        else:
            out.print(f"wrote {len(paths)} skills to {directory}")


@skills_app.command("retire")
def skills_retire(names: list[str], as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Retire live skills: a new generation."""
    with _Guard(), _engine() as engine:
        gen = engine.library_of(agent).retire(names, reason=f"retire {', '.join(names)}")
        if as_json:
            _print_json({"generation": _generation_json(gen)})
        else:
            out.print(f"retired {', '.join(names)} -> generation {gen.number}")


@skills_app.command("history")
def skills_history(as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Every generation of the agent's library, with its reason and diff."""
    with _Guard(), _engine() as engine:
        gens = engine.library_of(agent).history()
        if as_json:
            _print_json({"generations": [_generation_json(g) for g in gens]})
            return
        table = Table(title="generations")
        for col in ("gen", "time", "reason", "added", "updated", "retired"):
            table.add_column(col)
        for g in gens:
            table.add_row(
                str(g.number),
                g.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                g.reason,
                ", ".join(g.added),
                ", ".join(g.updated),
                ", ".join(g.retired),
            )
        out.print(table)


@skills_app.command("reembed")
def skills_reembed(as_json: JsonOpt = False) -> None:
    """Re-embed what another model embedded (skills: one new generation; trajectories: in
    place) with the configured embedder, so vectors of two models are never served together."""
    with _Guard(), _engine(embedder=True) as engine:
        done = engine.reembed()
        if as_json:
            _print_json(done)
        elif not done["skills"] and not done["trajectories"]:
            out.print(f"nothing to re-embed: every vector is {done['embedder']}'s", highlight=False)
        else:
            out.print(
                f"re-embedded {len(done['skills'])} skills (generation {done['generation']}) "
                f"and {done['trajectories']} trajectories with {done['embedder']}",
                highlight=False,
            )


@skills_app.command("rollback")
def skills_rollback(generation: int, as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Restore the agent's live set of GENERATION, as a new generation."""
    with _Guard(), _engine(embedder=True) as engine:
        gen = engine.library_of(agent).rollback(generation)
        if as_json:
            _print_json({"generation": _generation_json(gen)})
        else:
            out.print(f"rolled back to generation {generation} -> generation {gen.number}")


@skills_app.command("share")
def skills_share(
    name: str,
    from_agent: Annotated[str, typer.Option("--from", help="The agent that owns the skill now.")],
    group: Annotated[
        list[str] | None,
        typer.Option(
            "--group",
            help="Share with this group of agents only (settings [agents] groups); repeatable. "
            "Default: every agent.",
        ),
    ] = None,
    allow_flagged: Annotated[
        bool,
        typer.Option("--allow-flagged", help="Share even if a vetting check holds it."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Promote agent FROM's live skill NAME to shared: every agent (or the agents of
    --group) receives it. Vetted again against the receiving agents' libraries."""
    with _Guard(), _engine(embedder=True) as engine:
        gen = engine.library_of(from_agent).share(
            name, groups=list(group or []), allow_flagged=allow_flagged
        )
        if as_json:
            _print_json({"generation": _generation_json(gen)})
        else:
            whom = f"the agents of {', '.join(group)}" if group else "every agent"
            out.print(f"shared {name} from {gen.agent} with {whom} -> generation {gen.number}")


# -- retrieval ---------------------------------------------------------------------------
@app.command("retrieve")
def retrieve(
    text: str,
    k: Annotated[int | None, typer.Option("--k", help="How many skills at most.")] = None,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Show what would be injected for TEXT (into a call of --agent)."""
    with _Guard():
        from metaclaw_core.config import Settings
        from metaclaw_core.engine import MetaClaw

        settings = Settings()
        if k is not None:
            settings.retrieval.top_k = k
        with MetaClaw(settings, capture=False) as engine:
            if not engine.wait_ready():
                _fail(f"the embedding model could not be loaded: {engine.faults.last_error or ''}")
            inj = engine.before_call(
                CallContext(
                    framework="cli", messages=[Message(role="user", content=text)], agent=agent
                )
            )
            if as_json:
                _print_json(
                    {
                        "query": inj.query,
                        "generation": inj.generation,
                        "skills": [
                            {"name": s.skill.name, "score": round(s.score, 4)} for s in inj.skills
                        ],
                        "text": inj.text,
                    }
                )
                return
            out.print(f"query: {inj.query!r}  generation {inj.generation}")
            for s in inj.skills:
                out.print(f"  {s.score:.3f}  {s.skill.name}")
            out.print(inj.text or "(nothing would be injected)", highlight=False, markup=False)


# -- trajectories --------------------------------------------------------------------------
def _traj_summary(t: Trajectory) -> dict[str, Any]:
    return {
        "id": t.id,
        "created_at": t.created_at.isoformat(),
        "session_id": t.session_id,
        "framework": t.framework,
        "model": t.model,
        "generation": t.generation,
        "query": t.query,
        "injected_skills": t.injected_skills,
        "output_text": t.output.text,
        "latency_ms": t.latency_ms,
        "error": t.error,
        "outcome": t.outcome,
        "truncated": t.truncated,
        "reward": t.reward,
        "agent": t.agent,
    }


@traj_app.command("list")
def trajectories_list(
    limit: Annotated[int, typer.Option("--limit", "-n")] = 20,
    session: Annotated[str | None, typer.Option("--session")] = None,
    generation: Annotated[int | None, typer.Option("--generation")] = None,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """The newest captured trajectories (of --agent; every agent's without it)."""
    with _Guard(), _engine() as engine:
        who = None if agent is None else engine.library_of(agent).agent
        items = engine.trajectories.recent(
            limit, session_id=session, generation=generation, agent=who
        )
        if as_json:
            _print_json({"trajectories": [_traj_summary(t) for t in items]})
            return
        table = Table(title="trajectories (newest first)")
        for col in ("id", "time", "session", "gen", "injected", "reward", "query"):
            table.add_column(col)
        for t in items:
            table.add_row(
                t.id[:12],
                t.created_at.strftime("%m-%d %H:%M:%S"),
                t.session_id or "",
                str(t.generation),
                ", ".join(t.injected_skills),
                "" if t.reward is None else f"{t.reward:+.2f}",
                t.query[:60],
            )
        out.print(table)


@traj_app.command("show")
def trajectories_show(trajectory_id: str, as_json: JsonOpt = False) -> None:
    """One trajectory in full (an id prefix from `list` is not enough: give the whole id)."""
    with _Guard(), _engine() as engine:
        t = engine.trajectories.get(trajectory_id)
        if t is None:
            _fail(f"no trajectory {trajectory_id!r}; see `metaclaw trajectories list`")
            return
        if as_json:
            _print_json(t.model_dump(mode="json"))
            return
        out.print(_traj_summary(t))
        for m in t.messages:
            out.print(f"[bold]{m.role}[/bold]: ", end="")
            out.print(m.content, highlight=False, markup=False)
        out.print("[bold]output[/bold]: ", end="")
        out.print(t.output.text, highlight=False, markup=False)


@app.command("feedback")
def feedback(
    trajectory_id: str,
    reward: Annotated[float, typer.Argument(help="From -1 (bad) to 1 (good).")],
    detail: Annotated[str | None, typer.Option("--detail")] = None,
    correction: Annotated[
        str | None,
        typer.Option(
            "--correction",
            help="What should have been done (a reward <= 0): it becomes a candidate skill at "
            "once, vetted, without any LLM.",
        ),
    ] = None,
    no_evolve: Annotated[
        bool,
        typer.Option("--no-evolve", help="With --correction: record it only, make no skill now."),
    ] = False,
) -> None:
    """Record explicit feedback for a trajectory (or a correction that becomes a skill)."""
    with _Guard():
        if not -1.0 <= reward <= 1.0:
            _fail("reward must be between -1 and 1")
        if correction is not None and (reward > 0 or not correction.strip()):
            _fail("a --correction needs a reward <= 0 and a non-empty text")
        from metaclaw_core.config import Settings
        from metaclaw_core.engine import MetaClaw

        settings = Settings()
        settings.embedding.preload = correction is not None and not no_evolve
        # This process records; it does not run background learning of its own.
        settings.evolver.auto = settings.evolver.feedback_auto = False
        settings.judge.enabled = False
        with MetaClaw(settings) as engine:
            if correction is not None:
                engine.feedback(trajectory_id, reward, source="correction", detail=correction)
            else:
                engine.feedback(trajectory_id, reward, detail=detail)
            if not engine.flush(30):
                _fail("the feedback is in the spool but the store could not be written yet")
            out.print(f"recorded {reward:+.2f} for {trajectory_id}")
            if correction is not None and not no_evolve:
                from metaclaw_core.evolve.cli import _print_report
                from metaclaw_core.evolve.loop import evolver_of

                report = evolver_of(engine).from_corrections(
                    trajectory_ids=[trajectory_id], trigger="cli feedback"
                )
                _print_report(report)


# -- status and demo -----------------------------------------------------------------------
@app.command("status")
def status(
    as_json: JsonOpt = False,
    read_store: Annotated[
        bool, typer.Option("--read-store", hidden=True, help="Always open the store.")
    ] = False,
) -> None:
    """Paths, counts, generation, model, health."""
    from metaclaw_core.config import Settings
    from metaclaw_core.status import quick_status

    with _Guard():
        # a local store whose cached snapshot is current is answered from its manifests
        data = None if read_store else quick_status(Settings())
        if data is None:
            with _engine() as engine:
                engine.refresh_snapshot()
                data = engine.status()
                if set(data.get("agents") or {}) - {engine.agent}:  # several agents
                    try:
                        data["trajectories_by_agent"] = engine.trajectories.agents()
                    except Exception as exc:  # counts are extra: the status still prints
                        data["store_error"] = str(exc)
                data["config_file"] = str(engine.settings.config_file)
                data["config_file_exists"] = engine.settings.config_file.exists()
        if as_json:
            _print_json(data)
            return
        for key in (
            "home",
            "config_file",
            "store_uri",
            "generation",
            "live_skills",
            "trajectories",
            "embedding_model",
        ):
            out.print(f"{key:>16}: {data.get(key)}", highlight=False)
        agents = data.get("agents") or {}
        if len(agents) > 1 or set(agents) - {"default"}:
            table = Table(title="agents")
            for col in ("agent", "generation", "own skills", "shared received", "trajectories"):
                table.add_column(col)
            counts = data.get("trajectories_by_agent") or {}
            for name, a in agents.items():
                table.add_row(
                    name,
                    str(a["generation"]),
                    str(a["live_skills"]),
                    str(a["received"]),
                    str(counts.get(name, "")),
                )
            out.print(table)
        if data.get("store_error"):
            out.print(f"[red]{'store_error':>16}: {data['store_error']}[/red]")


@app.command("demo")
def demo(
    home: Annotated[
        Path | None, typer.Option("--keep", help="Keep the demo's data in this directory.")
    ] = None,
) -> None:
    """Seed skills, run calls through the engine, show injections and captures (offline)."""
    from metaclaw_core.demo import run_demo

    with _Guard():
        run_demo(home=home, console=out)


# `metaclaw serve` and `metaclaw openclaw ...` (FastAPI/uvicorn load only when they run).
from metaclaw_core.service.cli import register as _register_service  # noqa: E402

_register_service(app)
from metaclaw_core.service.connect import register as _register_connect  # noqa: E402

_register_connect(app)  # `metaclaw connect claude-code|codex|openclaw`
from metaclaw_core.train.cli import register as _register_train  # noqa: E402

_register_train(app)

# `metaclaw evolve`, `metaclaw judge`, `metaclaw skills pending|approve|reject|stats`.
from metaclaw_core.evolve.cli import register as _register_fastloop  # noqa: E402

_register_fastloop(app, skills_app)

# `metaclaw bench run|report`, `metaclaw models list|fetch|serve`.
from metaclaw_core.bench.cli import register as _register_bench  # noqa: E402

_register_bench(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
