"""``metaclaw train`` and ``metaclaw scheduler``: the slow loop from the command line.

``register(app)`` adds both groups to the main typer app. Heavy imports happen inside the
commands (a training backend loads only when a step runs).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from metaclaw_core.cli_support import JsonOpt
from metaclaw_core.cli_support import fail as _fail
from metaclaw_core.cli_support import print_json as _print_json
from metaclaw_core.cli_support import read_only_engine as _engine
from metaclaw_core.errors import MetaClawError
from metaclaw_core.schedule.window import LoopStats

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw

train_app = typer.Typer(
    help="The slow loop: GRPO on a LoRA adapter over the query buffer.",
    invoke_without_command=True,
)
scheduler_app = typer.Typer(no_args_is_help=True, help="When training may run (OMLS).")


def _scheduler(engine: MetaClaw) -> Any:
    from metaclaw_core.schedule.window import OpportunisticScheduler
    from metaclaw_core.train.runtime import build_signals

    return OpportunisticScheduler(build_signals(engine, engine.settings))


@train_app.callback()
def train(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Run one GRPO step now, then exit.")] = False,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Stop after this many trained steps.")
    ] = None,
    respect_window: Annotated[
        bool,
        typer.Option("--respect-window", help="With --once: only train if a window is open."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train: in idle windows until Ctrl-C (or --steps), or one step now with --once."""
    if ctx.invoked_subcommand is not None:
        return
    from metaclaw_core.train.runtime import SlowLoop

    try:
        with _engine() as engine:
            loop = SlowLoop(engine, serve=False)
            try:
                if once:
                    if respect_window and not loop.scheduler.poll().open:
                        window = loop.scheduler.state
                        _fail(f"no training window now: {window.reason if window else ''}", 3)
                    report = loop.trainer.step()
                    loop.trainer.checkpoint()
                    data = {k: v for k, v in report.__dict__.items()}
                    if as_json:
                        _print_json(data)
                    else:
                        reward = "-" if report.mean_reward is None else f"{report.mean_reward:+.3f}"
                        typer.echo(
                            f"step {report.step}: {report.status}; {report.prompts} prompts, "
                            f"{report.groups_kept} groups kept, {report.datums} datums, "
                            f"mean reward {reward}, {report.seconds:.1f}s"
                        )
                    return
                typer.echo("training in idle windows; Ctrl-C stops (a checkpoint is saved)")
                stats: LoopStats | None
                try:
                    stats = loop.run(max_steps=steps)
                except KeyboardInterrupt:
                    loop.stop()
                    stats = loop.stats
                if stats is not None:
                    typer.echo(
                        f"{stats.steps} steps in {stats.windows} windows, {stats.pauses} pauses"
                    )
            finally:
                loop.close()
    except MetaClawError as exc:
        _fail(str(exc))


@train_app.command("status")
def train_status(as_json: JsonOpt = False) -> None:
    """Query buffer sizes, checkpoints and the served weights."""
    from metaclaw_core.train.buffer import QueryBuffer
    from metaclaw_core.train.checkpoints import CheckpointLog

    try:
        with _engine() as engine:
            t = engine.settings.train
            buffer = QueryBuffer(
                engine.store, engine.library.current_generation, agent=engine.agent
            )
            sizes = buffer.sizes()
            log = CheckpointLog(engine.store)
            model = t.base_model if t.backend == "tinker" else None
            states = [
                c for c in log.history(backend=t.backend, kind="state") if model in (None, c.model)
            ]
            samplers = [
                c
                for c in log.history(backend=t.backend, kind="sampler")
                if model in (None, c.model)
            ]
            data: dict[str, Any] = {
                "backend": t.backend,
                "enabled": t.enabled,
                "buffer": sizes.__dict__,
                "last_checkpoint": states[-1].__dict__ if states else None,
                "last_published": samplers[-1].__dict__ if samplers else None,
                "checkpoints": len(states),
            }
    except MetaClawError as exc:
        _fail(str(exc))
        return
    if as_json:
        _print_json(data)
        return
    b = sizes
    typer.echo(
        f"backend: {t.backend} (slow loop in `metaclaw serve`: {'on' if t.enabled else 'off'})"
    )
    typer.echo(
        f"generation {b.generation}: query buffer {b.query} (rewarded {b.rewarded_query}), "
        f"consumed {b.consumed}, unusable {b.unusable}; support set {b.support}"
    )
    cp = data["last_checkpoint"]
    saved = "none" if cp is None else f"step {cp['step']} at {cp['path']}"
    typer.echo(f"last checkpoint: {saved}")
    sp = data["last_published"]
    served = "base model" if sp is None else f"{sp['name']} ({sp['path']})"
    typer.echo(f"served weights: {served}")


@scheduler_app.command("status")
def scheduler_status(as_json: JsonOpt = False) -> None:
    """Each idle signal's reading and whether a training window is open now."""
    try:
        with _engine() as engine:
            window = _scheduler(engine).poll()
    except MetaClawError as exc:
        _fail(str(exc))
        return
    if as_json:
        _print_json(
            {
                "open": window.open,
                "reason": window.reason,
                "at": window.at.isoformat(),
                "signals": [
                    {
                        "name": r.signal,
                        "kind": r.kind,
                        "state": r.state,
                        "reason": r.reason,
                        "until": r.until.isoformat() if r.until else None,
                    }
                    for r in window.readings
                ],
            }
        )
        return
    typer.echo(f"window {'OPEN' if window.open else 'closed'}: {window.reason}")
    for r in window.readings:
        typer.echo(f"  {r.signal:<14} {r.kind:<5} {r.state:<8} {r.reason}")


@scheduler_app.command("next-window")
def scheduler_next_window(
    hours: Annotated[float | None, typer.Option("--hours", help="How far ahead to look.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """When the time-based signals (sleep window, calendar) next say the user is away."""
    try:
        with _engine() as engine:
            horizon = timedelta(hours=hours or engine.settings.schedule.horizon_h)
            nxt = _scheduler(engine).next_window(horizon=horizon)
    except MetaClawError as exc:
        _fail(str(exc))
        return
    data = {
        "start": nxt.start.isoformat() if nxt else None,
        "end": nxt.end.isoformat() if nxt else None,
        "note": "also needs the system idle and the agent quiet at that time",
    }
    if as_json:
        _print_json(data)
    elif nxt is None:
        typer.echo(f"no away time predicted in the next {horizon}")
    else:
        local = os.environ.get("TZ")
        typer.echo(
            f"next window: {nxt.start.astimezone():%Y-%m-%d %H:%M} -> "
            f"{nxt.end.astimezone():%Y-%m-%d %H:%M}{f' ({local})' if local else ''} "
            "(if the system is idle and the agent quiet then)"
        )


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``scheduler`` to the main CLI."""
    app.add_typer(train_app, name="train")
    app.add_typer(scheduler_app, name="scheduler")
