"""The fast loop's commands: ``metaclaw evolve``, ``metaclaw judge``, ``metaclaw report`` and
``metaclaw skills pending|approve|reject|stats|evidence``. ``--json`` output is stable
(docs/cli.md).

``register(app, skills_app)`` adds them to the main ``metaclaw`` typer app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from metaclaw_core.cli_support import AgentOpt, JsonOpt
from metaclaw_core.cli_support import Guard as _Guard
from metaclaw_core.cli_support import fail as _fail
from metaclaw_core.cli_support import generation_json as _generation_json
from metaclaw_core.cli_support import print_json as _print_json
from metaclaw_core.cli_support import read_only_engine as _engine
from metaclaw_core.cli_support import skill_json as _skill_json

if TYPE_CHECKING:  # the engine's modules load when a command runs, not for `metaclaw --help`
    from metaclaw_core.evolve.report import EvolutionReport

out = Console()


def _print_report(report: EvolutionReport) -> None:
    what = "dry run" if report.dry_run else report.review
    out.print(
        f"evolve ({report.mode}, {what}): {len(report.failures)} failure(s), "
        f"{len(report.candidates)} candidate(s)",
        highlight=False,
    )
    for c in report.candidates:
        extra = f" (merged into {c.merged_into})" if c.merged_into else ""
        extra += f" (updates {c.updates})" if c.updates and not c.merged_into else ""
        out.print(f"  [{c.verdict}] {c.skill.name}{extra}", highlight=False, markup=False)
        for r in c.reasons:
            out.print(f"      {r}", highlight=False, markup=False)
    if report.message:
        out.print(report.message, highlight=False, markup=False)


def evolve(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show candidates and vetting; write nothing.")
    ] = False,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="llm: the evolver LLM distils recent failures; feedback: explicit corrections "
            "become skills directly (no LLM).",
        ),
    ] = "llm",
    review: Annotated[
        str | None,
        typer.Option("--review", help="auto or manual (default: vetting.review)."),
    ] = None,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Turn failures into vetted skills now (live, or pending in manual review)."""
    with _Guard():
        if mode not in ("llm", "feedback"):
            _fail(f"--mode must be llm or feedback, not {mode!r}")
        if review not in (None, "auto", "manual"):
            _fail(f"--review must be auto or manual, not {review!r}")
        with _engine(embedder=True) as engine:
            from metaclaw_core.evolve.loop import evolver_of

            evolver = evolver_of(engine)
            if agent is not None:  # that agent's failures; its candidates
                evolver = engine.fastloop.evolver_for(engine.library_of(agent).agent)
            if mode == "feedback":
                report = evolver.from_corrections(dry_run=dry_run, trigger="cli", review=review)
            else:
                report = evolver.evolve(dry_run=dry_run, trigger="cli", review=review)
        if as_json:
            _print_json(report.to_json())
        else:
            _print_report(report)


def judge(
    trajectory_id: str,
    record: Annotated[
        bool, typer.Option("--record", help="Store the score as a reward (source judge).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Score one stored trajectory with the PRM judge (m votes, majority)."""

    from metaclaw_core.config import Settings
    from metaclaw_core.engine import MetaClaw
    from metaclaw_core.llm import not_configured_message
    from metaclaw_core.reward.judge import PRMJudge

    with _Guard():
        settings = Settings()
        settings.embedding.preload = False
        # This engine only records the score: no background scoring or evolving of its own.
        settings.judge.enabled = False
        settings.evolver.auto = settings.evolver.feedback_auto = False
        if not settings.judge.base_url:
            _fail(not_configured_message("judge"))
        with MetaClaw(settings, capture=record) as engine:
            t = engine.trajectories.get(trajectory_id)
            if t is None:
                _fail(f"no trajectory {trajectory_id!r}; see `metaclaw trajectories list`")
                return
            judgment = PRMJudge(settings.judge).judge(t)
            reward = judgment.reward
            recorded = False
            if record and reward is not None:
                engine.feedback(t.id, reward.value, source=reward.source, detail=reward.detail)
                recorded = engine.flush(30)
        if as_json:
            _print_json(
                {
                    "trajectory_id": t.id,
                    "score": judgment.score,
                    "why_none": judgment.why_none,
                    "votes": [
                        {
                            "value": v.value,
                            "reason": v.reason,
                            "error": v.error,
                            "latency_ms": v.latency_ms,
                        }
                        for v in judgment.votes
                    ],
                    "recorded": recorded,
                }
            )
            return
        for v in judgment.votes:
            shown = "failed" if v.value is None else f"{v.value:+d}"
            out.print(f"  vote {shown}: {v.reason or v.error or ''}", highlight=False, markup=False)
        score = "no score" if judgment.score is None else f"{judgment.score:+d}"
        out.print(f"score: {score}" + (f" ({judgment.why_none})" if judgment.why_none else ""))


def skills_pending(as_json: JsonOpt = False, agent: AgentOpt = None) -> None:
    """Candidates waiting for a person: held by vetting (with why), or under manual review."""
    with _Guard(), _engine() as engine:
        held = engine.library_of(agent).pending_reviews()
        if as_json:
            _print_json(
                {
                    "pending": [
                        {
                            **_skill_json(s),
                            "verdict": review.verdict,
                            "findings": [f.to_json() for f in review.findings],
                        }
                        for s, review in held
                    ]
                }
            )
            return
        if not held:
            out.print("no candidates are pending review")
            return
        live = {s.name for s in engine.library_of(agent).live()}
        for s, review in held:
            kind = "update" if s.name in live else "new"
            why = "quarantined" if review.findings else "manual review"
            out.print(f"{s.name}  ({kind}, from {s.source}; {why})", highlight=False, markup=False)
            out.print(f"    {s.description}", highlight=False, markup=False)
            for reason in review.reasons():
                out.print(f"    held: {reason}", highlight=False, markup=False)
        out.print("decide with `metaclaw skills approve NAME` or `metaclaw skills reject NAME`")


def skills_approve(
    names: Annotated[list[str] | None, typer.Argument(help="Candidates to approve.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Approve every pending candidate.")] = False,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Make pending candidates live (vetted again; what the review held is yours to admit,
    what it rejects stays out): one new generation."""
    with _Guard():
        if not names and not all_:
            _fail("name the candidates to approve, or give --all")
        with _engine(embedder=True) as engine:
            gen = engine.library_of(agent).approve(None if all_ else list(names or []))
        approved = sorted({*gen.added, *gen.updated})
        if as_json:
            _print_json({"generation": _generation_json(gen), "approved": approved})
        else:
            out.print(f"approved {', '.join(approved)} -> generation {gen.number}")


def skills_reject(
    names: Annotated[list[str], typer.Argument(help="Candidates to reject.")],
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Reject pending candidates (kept for the record, never live)."""
    with _Guard(), _engine() as engine:
        rejected = engine.library_of(agent).reject(names)
        if as_json:
            _print_json({"rejected": rejected})
        else:
            out.print(f"rejected {', '.join(rejected)}")


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}"


def skills_stats(
    retire: Annotated[
        bool,
        typer.Option("--retire", help="Retire the skills that do not help (a new generation)."),
    ] = False,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Per skill: times injected, mean reward with it vs comparable calls without it."""
    from metaclaw_core.evolve.lifecycle import retire_unhelpful, skill_stats

    with _Guard(), _engine(embedder=True) as engine:
        stats = skill_stats(engine, agent)
        retired = retire_unhelpful(engine, stats, agent) if retire else None
        generation = engine.library_of(agent).current_generation()
        if as_json:
            data: dict[str, Any] = {
                "generation": generation,
                "skills": [s.to_json() for s in stats],
                "retired": None if retired is None else _generation_json(retired),
            }
            _print_json(data)
            return
        table = Table(title=f"skill effectiveness (generation {generation})")
        for col in ("name", "injected", "with", "n", "without", "n", "gain", "verdict"):
            table.add_column(col)
        for s in stats:
            table.add_row(
                s.name,
                str(s.injected),
                _fmt(s.mean_with),
                str(s.rewarded_with),
                _fmt(s.mean_without),
                str(s.comparable_without),
                _fmt(s.gain),
                s.verdict,
            )
        out.print(table)
        if retired is not None:
            out.print(f"retired {', '.join(retired.retired)} -> generation {retired.number}")


def _num(value: Any, digits: int = 2) -> str:
    return "" if value is None else f"{value:+.{digits}f}"


def skills_evidence(
    name: Annotated[str | None, typer.Argument(help="One skill (default: every skill).")] = None,
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """Evidence per skill: replays (fixed, regressed) and the holdout (arms, lift, state)."""
    from metaclaw_core.evolve.evidence import skill_evidence

    with _Guard(), _engine() as engine:
        records = skill_evidence(engine, name, agent=agent)
        if as_json:
            _print_json({"skills": records})
            return
        if not records:
            out.print("no evidence recorded yet (no replays, no holdout)")
            return
        table = Table(title="skill evidence")
        table.add_column("name", no_wrap=True)
        for col in ("live", "replays", "holdout", "injected / held out", "lift [interval]"):
            table.add_column(col)
        for r in records:
            rp, h = r["replays"], r["holdout"] or {}
            replays = (
                f"fixed {rp['fixed']}/{rp['fixed'] + rp['not-fixed']}, regressed "
                f"{rp['regressed']}/{rp['regressed'] + rp['kept']}"
                + (
                    f", {rp['error'] + rp['unscored']} not run"
                    if rp["error"] + rp["unscored"]
                    else ""
                )
                if rp["total"]
                else "not validated"
            )
            lift = _num(h.get("lift"))
            if h.get("low") is not None:
                lift += f" [{_num(h.get('low'))}, {_num(h.get('high'))}]"
            table.add_row(
                r["skill"],
                "yes" if r["live"] else "no",
                replays,
                str(h.get("state") or "-"),
                f"{h.get('injected', 0)} / {h.get('held_out', 0)}" if h else "-",
                lift,
            )
        out.print(table)
        for r in records:
            h = r["holdout"] or {}
            if h.get("reason") and h.get("state") != "holdout":
                out.print(f"{r['skill']}: {h['reason']}", highlight=False, markup=False)


def report(
    png: Annotated[
        str | None,
        typer.Option("--png", help="Where to write the PNG ('' for none)."),
    ] = "metaclaw-report.png",
    as_json: JsonOpt = False,
    agent: AgentOpt = None,
) -> None:
    """The learning curve: mean reward and failure rate per generation and per day."""
    from pathlib import Path

    from metaclaw_core.evolve.evidence import learning_curve, plot_curve

    with _Guard(), _engine() as engine:
        curve = learning_curve(engine, agent)
    written: str | None = None
    if png:
        try:
            written = str(plot_curve(curve, Path(png)))
        except ImportError as exc:
            _fail(str(exc))
    if as_json:
        _print_json({**curve, "png": written})
        return
    for key, label in (("generations", "generation"), ("days", "day")):
        table = Table(title=f"learning curve per {label}")
        for col in (label, "calls", "scored", "mean reward", "failure rate"):
            table.add_column(col)
        for r in curve[key]:
            rate = "" if r["failure_rate"] is None else f"{r['failure_rate']:.0%}"
            table.add_row(
                str(r[label]), str(r["calls"]), str(r["scored"]), _num(r["mean_reward"]), rate
            )
        out.print(table)
    if written:
        out.print(f"wrote {written}", highlight=False)


def register(app: typer.Typer, skills_app: typer.Typer) -> None:
    app.command("evolve")(evolve)
    app.command("judge")(judge)
    app.command("report")(report)
    skills_app.command("evidence")(skills_evidence)
    skills_app.command("pending")(skills_pending)
    skills_app.command("approve")(skills_approve)
    skills_app.command("reject")(skills_reject)
    skills_app.command("stats")(skills_stats)
