"""Run a suite day by day in one mode, resumably, writing one JSON file per round.

Modes:

* ``baseline``: the agent alone; nothing is injected, captured or learned.
* ``skills``: the MetaClaw middleware injects skills and captures every model call; after
  each round the score becomes feedback (a wrong answer is a *correction* carrying the
  round's feedback text, which becomes a skill at once — the fast loop's feedback mode); at
  the end of each day the evolver LLM (when configured) distils the day's failures. What was
  learned carries over to the next day.
* ``full``: ``skills``, plus GRPO steps of the slow loop after each day ("while the user
  sleeps") through the configured training backend.

Run folder::

    RUN/run.json                 suite, mode, model, settings (a resume must match)
    RUN/days/dayNN/start.json    the skill generation the day started from
    RUN/days/dayNN/rK.json       one per round: question, answer, score, reason, actions, check
    RUN/days/dayNN/day.json      written last: the day is complete
    RUN/workspaces/dayNN/        the day's workspace (a fresh copy of the suite's)
    RUN/metaclaw/                METACLAW_HOME of the run (skills, trajectories, rewards)

A run that stops (crash, Ctrl-C, reboot) resumes at the first day without ``day.json``:
its round files are removed, the skill library is rolled back to the generation the day
started from, and the day runs again on a fresh workspace.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import SecretStr

from metaclaw_core import __version__
from metaclaw_core.bench.agent import AgentResult, ModelConfig
from metaclaw_core.bench.preflight import (
    MAX_MODEL_FAILURES,
    ModelEndpointError,
    check_model_endpoint,
    failed_on_model,
)
from metaclaw_core.bench.scoring import (
    Score,
    feedback_text,
    network_isolation,
    run_check,
    score_multi_choice,
)
from metaclaw_core.bench.suite import Day, Round, Suite
from metaclaw_core.bench.workspace import ActionLog
from metaclaw_core.errors import MetaClawError
from metaclaw_core.hosts import is_loopback

log = logging.getLogger("metaclaw.bench")
Mode = Literal["baseline", "skills", "full"]
MODES: tuple[Mode, ...] = ("baseline", "skills", "full")
Learn = Literal["feedback", "evolver"]
LEARN: tuple[Learn, ...] = ("feedback", "evolver")


class BenchError(MetaClawError):
    """A benchmark run cannot start or go on."""


class Agent(Protocol):
    def run(
        self,
        prompt: str,
        workspace: Path,
        log: ActionLog,
        session_id: str,
        feedback: str | None = None,
    ) -> AgentResult:
        """Answer one round in ``workspace`` (``feedback``: on the previous round's answer);
        never raises for the model's or a tool's errors."""
        ...


AgentFactory = Callable[[ModelConfig, Any], Agent]


def _on_this_machine(base_url: str) -> bool:
    """Whether ``base_url`` names a loopback host (a model server on this machine)."""
    return is_loopback(urlsplit(base_url).hostname or "")


@dataclass
class RunConfig:
    mode: Mode
    model: ModelConfig
    check_timeout_s: float = 30.0
    learn: Learn = "feedback"  # corrections become skills at once | the evolver LLM, per day
    evolver_base_url: str | None = None  # learn="evolver": the evolver's endpoint
    evolver_model: str | None = None
    train_steps_per_day: int = 4  # full mode
    days: tuple[str, ...] = ()  # empty: all
    agent: str = "langchain"  # what answers the rounds (recorded; a resume must match)
    validate: bool = False  # replay validation of new skills against the agent's model

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["model"].pop("api_key", None)
        out["days"] = list(self.days)
        return out


@dataclass
class RoundResult:
    day: str
    round: str
    type: str
    question: str
    previous_feedback: str | None
    answer: str
    score: float
    reason: str
    feedback: str
    selected: list[str] = field(default_factory=list)
    error: str | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    escapes: list[dict[str, str]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    trajectory_ids: list[str] = field(default_factory=list)
    generation: int | None = None
    injected: list[str] = field(default_factory=list)
    model_calls: int = 0
    seconds: float = 0.0
    agent: dict[str, Any] = field(default_factory=dict)


def _write_json(path: Path, data: Any) -> None:
    """Write atomically: a file under its final name is always whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_agent(config: ModelConfig, engine: Any) -> Agent:
    """The LangChain agent the LangChain adapter registers (``metaclaw.bench_agents``)."""
    from metaclaw_core.bench.agent import agent_factory

    agent: Agent = agent_factory("langchain")(config, engine)
    return agent


class BenchRun:
    """One run of ``suite`` in one mode, in ``run_dir``."""

    def __init__(
        self,
        suite: Suite,
        run_dir: Path,
        config: RunConfig,
        *,
        agent_factory: AgentFactory = default_agent,
        on_round: Callable[[RoundResult], None] | None = None,
        engine_factory: Callable[[Any], Any] | None = None,
        check_endpoint: bool = True,
        max_model_failures: int = MAX_MODEL_FAILURES,
    ) -> None:
        if config.mode not in MODES:
            raise BenchError(f"mode must be one of {', '.join(MODES)}, not {config.mode!r}")
        if config.learn not in LEARN:
            raise BenchError(f"learn must be one of {', '.join(LEARN)}, not {config.learn!r}")
        if config.learn == "evolver" and not config.evolver_base_url:
            raise BenchError("learn='evolver' needs an evolver endpoint (evolver_base_url)")
        self.suite = suite
        self.run_dir = run_dir.resolve()
        self.config = config
        self.agent_factory = agent_factory
        self.on_round = on_round
        self.engine_factory = engine_factory
        unknown = [d for d in config.days if d not in {x.id for x in suite.days}]
        if unknown:
            raise BenchError(f"no such days in {suite.root}: {', '.join(unknown)}")
        self.days: list[Day] = [d for d in suite.days if not config.days or d.id in config.days]
        self.engine: Any = None
        self.slow: Any = None  # full mode: the slow loop whose policy answers the agent
        self.policy_server: Any = None
        self.agent: Any = None
        self._failed_today: list[str] = []
        self.check_endpoint = check_endpoint
        self.max_model_failures = max_model_failures
        self._model_failures: list[str] = []  # consecutive rounds that failed on the model

    # -- bookkeeping ----------------------------------------------------------------------
    @property
    def learns(self) -> bool:
        return self.config.mode != "baseline"

    def day_dir(self, day: Day) -> Path:
        return self.run_dir / "days" / day.id

    def is_done(self, day: Day) -> bool:
        return (self.day_dir(day) / "day.json").is_file()

    def _check_or_write_manifest(self) -> None:
        """Write ``run.json``, or check that a resumed run is the same run: suite, mode,
        model, learning and days must match; the endpoint may move (recorded per resume)."""
        manifest = self.run_dir / "run.json"
        want = {
            "suite": str(self.suite.root),
            "suite_name": self.suite.name,
            "mode": self.config.mode,
            "model": self.config.model.model,
            "learn": self.config.learn if self.learns else None,
            "days": [d.id for d in self.days],
        }
        if not manifest.exists():
            _write_json(
                manifest,
                {
                    **want,
                    "base_url": self.config.model.base_url,
                    "started_at": _now(),
                    "metaclaw_version": __version__,
                    "network_isolated_checks": network_isolation(),
                    "config": self.config.to_json(),
                    "resumes": [],
                },
            )
            return
        have = _read_json(manifest)
        diff = [
            f"{k}: {have.get(k)!r} there, {v!r} now" for k, v in want.items() if have.get(k) != v
        ]
        agent = (have.get("config") or {}).get("agent", "langchain")  # older runs: langchain
        if agent != self.config.agent:
            diff.append(f"agent: {agent!r} there, {self.config.agent!r} now")
        if diff:
            details = "; ".join(diff)
            raise BenchError(
                f"{self.run_dir} holds a different run ({details}); "
                "use another --out folder to start a new run"
            )
        have.setdefault("resumes", []).append(
            {"at": _now(), "base_url": self.config.model.base_url}
        )
        _write_json(manifest, have)

    # -- the engine (skills/full) ----------------------------------------------------------
    def _open_engine(self) -> Any:
        from metaclaw_core import MetaClaw, Settings

        settings = Settings(home=self.run_dir / "metaclaw")
        settings.evolver.auto = False  # the run triggers learning itself, in a fixed order
        settings.evolver.feedback_auto = False
        settings.judge.enabled = False
        # Days are compared configuration against configuration: a randomised holdout would
        # withhold each new skill from half its first calls and blur that comparison.
        settings.holdout.enabled = False
        if self.config.learn == "evolver" and self.config.evolver_base_url:
            settings.evolver.base_url = self.config.evolver_base_url
            settings.evolver.model = self.config.evolver_model or self.config.model.model
            settings.evolver.timeout_s = self.config.model.timeout_s  # local models are slow
            settings.evolver.max_tokens = 1024
            if self.config.evolver_base_url == self.config.model.base_url:
                settings.evolver.api_key = SecretStr(self.config.model.api_key)
        if self.config.validate:
            # Replays go to the agent's own model; the suite's own checks are the scores.
            settings.validation.base_url = self.config.model.base_url
            settings.validation.model = self.config.model.model
            settings.validation.api_key = SecretStr(self.config.model.api_key)
            settings.validation.timeout_s = self.config.model.timeout_s
            settings.validation.deadline_s = max(120.0, 4 * self.config.model.timeout_s)
            if _on_this_machine(self.config.model.base_url):
                # a local server (`metaclaw models serve`) answers one request at a time:
                # replays in parallel only queue there, and the last ones run out of time
                settings.validation.parallelism = 1
        else:
            settings.validation.enabled = False
        engine = self.engine_factory(settings) if self.engine_factory else MetaClaw(settings)
        if self.config.validate:
            from metaclaw_core.bench.policy import ReplayCheck

            engine.pm.register(ReplayCheck(self.suite), name="bench:replay-check")
        if not engine.wait_ready(300):  # the first round must see the library as it is
            why = getattr(engine.embedder, "load_error", None) or "timed out"
            raise BenchError(f"the engine did not get ready: {why}")
        return engine

    def _serve_policy(self) -> ModelConfig:
        """full mode: start the slow loop (its current weights published) and serve its policy
        on loopback; the agent's model config pointing at it."""
        from metaclaw_core.bench.policy import BenchCheck
        from metaclaw_core.service.server import ThreadedServer
        from metaclaw_core.train.runtime import SlowLoop
        from metaclaw_core.train.serving import policy_app

        self.engine.pm.register(BenchCheck(self.suite), name="bench:check")
        self.slow = SlowLoop(self.engine, serve=True)
        self.slow.trainer.resume()  # loads the backend, publishes the newest weights
        app = policy_app(self.slow.policy, max_tokens_cap=self.config.model.max_tokens)
        self.policy_server = ThreadedServer(app).start()
        return replace(
            self.config.model,
            base_url=f"{self.policy_server.url}/v1",
            model=self.slow.policy.model_name,
        )

    def _close(self) -> None:
        close = getattr(self.agent, "close", None)
        self.agent = None
        if close is not None:
            close()
        if self.policy_server is not None:
            self.policy_server.stop()
            self.policy_server = None
        if self.slow is not None:
            self.slow.close()
            self.slow = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def _generation(self) -> int | None:
        """The library's current generation (the store's, not a snapshot that may lag)."""
        return None if self.engine is None else int(self.engine.library.current_generation())

    # -- running --------------------------------------------------------------------------
    def run(self, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
        """Run (or resume) every day not yet complete; return the run's summary."""
        if self.check_endpoint and self.config.mode != "full":  # full: the policy answers
            check_model_endpoint(self.config.model)  # before anything is written or run
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._check_or_write_manifest()
        total = sum(len(d.rounds) for d in self.days)
        done = sum(len(d.rounds) for d in self.days if self.is_done(d))
        try:
            model = self.config.model
            if self.learns:
                self.engine = self._open_engine()
            if self.config.mode == "full":
                model = self._serve_policy()
            agent = self.agent = self.agent_factory(model, self.engine)
            for day in self.days:
                if self.is_done(day):
                    continue
                self._run_day(day, agent, _progress_of(progress, day.id, done, total))
                done += len(day.rounds)
        finally:
            self._close()
        from metaclaw_core.bench.report import summarize

        summary = summarize(self.run_dir)
        _write_json(self.run_dir / "summary.json", summary)
        return summary

    def _start_day(self, day: Day) -> int | None:
        ddir = self.day_dir(day)
        start_file = ddir / "start.json"
        if start_file.exists():  # an interrupted day: undo what it learned, run it again
            start = _read_json(start_file).get("generation")
            if self.engine is not None and start is not None and self._generation() != start:
                self.engine.library.rollback(start, reason=f"bench: resume {day.id}")
                log.info("bench: %s resumed; skills rolled back to generation %s", day.id, start)
            shutil.rmtree(ddir)
        ddir.mkdir(parents=True, exist_ok=True)
        generation = self._generation()
        _write_json(start_file, {"generation": generation, "started_at": _now()})
        return generation

    def _run_day(self, day: Day, agent: Agent, progress: Callable[[int], None]) -> None:
        started = time.monotonic()
        self._failed_today = []
        start_generation = self._start_day(day)
        workspace = self.suite.fresh_workspace(self.run_dir / "workspaces" / day.id)
        previous_feedback: str | None = None
        scores: list[float] = []
        evolutions: list[dict[str, Any]] = []
        for i, rnd in enumerate(day.rounds):
            result = self._run_round(day, rnd, agent, workspace, previous_feedback)
            _write_json(self.day_dir(day) / f"{rnd.id}.json", asdict(result))
            self._stop_if_the_model_keeps_failing(result)
            scores.append(result.score)
            previous_feedback = result.feedback
            if self.learns:
                evolutions.extend(self._learn_from_round(result))
            if self.on_round is not None:
                self.on_round(result)
            progress(i + 1)
        # full: train first, on the day's calls (of the generation in force), then evolve;
        # the other order would leave the RL buffer only samples of an outdated generation.
        training = self._train_after_day(day) if self.config.mode == "full" else None
        if self.learns:
            evolutions.extend(self._end_of_day(day))
        _write_json(
            self.day_dir(day) / "day.json",
            {
                "day": day.id,
                "desc": day.desc,
                "rounds": len(day.rounds),
                "score": sum(scores) / len(scores),
                "generation_start": start_generation,
                "generation_end": self._generation(),
                "skills_live": [s.name for s in self.engine.library.live()] if self.engine else [],
                "generations": self._generations_since(start_generation),
                "evolutions": evolutions,
                "training": training,
                "seconds": round(time.monotonic() - started, 1),
                "finished_at": _now(),
            },
        )

    def _stop_if_the_model_keeps_failing(self, result: RoundResult) -> None:
        """Raise when ``max_model_failures`` rounds in a row failed on the model: their zeros
        would measure the server, not the agent. The day stays unfinished (a rerun of the
        same command resumes it, its skills rolled back to the day's start)."""
        if not failed_on_model(result.error, result.model_calls):
            self._model_failures = []
            return
        self._model_failures.append(f"{result.day}/{result.round}")
        if len(self._model_failures) >= self.max_model_failures:
            raise ModelEndpointError(
                f"metaclaw: stopped: {len(self._model_failures)} rounds in a row "
                f"({', '.join(self._model_failures)}) failed on the model at "
                f"{self.config.model.base_url}, not on the task (last: {result.error}); fix the "
                "model server and run the same command again to resume"
            )

    def _generations_since(self, start: int | None) -> list[dict[str, Any]]:
        """The generations published since ``start``: what changed in the library, and why."""
        if self.engine is None or start is None:
            return []
        return [
            {
                "number": g.number,
                "reason": g.reason,
                "added": list(g.added),
                "updated": list(g.updated),
                "retired": list(g.retired),
            }
            for g in self.engine.library.history()
            if g.number > start
        ]

    def _run_round(
        self,
        day: Day,
        rnd: Round,
        agent: Agent,
        workspace: Path,
        previous_feedback: str | None,
    ) -> RoundResult:
        actions = ActionLog()
        generation = self._generation()
        session = f"bench-{day.id}-{rnd.id}"
        try:
            res = agent.run(rnd.question, workspace, actions, session, previous_feedback)
        except Exception as exc:  # an agent that raises anyway: the round scores 0
            res = AgentResult(answer="", transcript=[], error=f"{type(exc).__name__}: {exc}")
        score = self._score(rnd, res, actions, workspace)
        injected = self._injected(res.trajectory_ids)
        return RoundResult(
            day=day.id,
            round=rnd.id,
            type=rnd.type,
            question=rnd.question,
            previous_feedback=previous_feedback,
            answer=res.answer,
            score=score.score,
            reason=score.detail,
            feedback=feedback_text(rnd, score),
            selected=list(score.selected),
            error=res.error,
            actions=actions.actions,
            escapes=actions.escapes,
            transcript=res.transcript,
            trajectory_ids=res.trajectory_ids,
            generation=generation,
            injected=injected,
            model_calls=res.model_calls,
            seconds=res.seconds,
            agent=res.agent,
        )

    def _score(self, rnd: Round, res: AgentResult, actions: ActionLog, workspace: Path) -> Score:
        outside = actions.wrote_outside
        if outside:
            return Score(0.0, f"agent tried to write outside its workspace: {', '.join(outside)}")
        if rnd.type == "multi_choice":
            return score_multi_choice(rnd, res.answer)
        return run_check(rnd, workspace, timeout_s=self.config.check_timeout_s)

    def _injected(self, trajectory_ids: list[str]) -> list[str]:
        if self.engine is None or not trajectory_ids:
            return []
        self.engine.flush(30)
        names: list[str] = []
        for tid in trajectory_ids:
            t = self.engine.trajectories.get(tid)
            for name in t.injected_skills if t is not None else []:
                if name not in names:
                    names.append(name)
        return names

    # -- learning ---------------------------------------------------------------------------
    def _learn_from_round(self, result: RoundResult) -> list[dict[str, Any]]:
        """The score as feedback on the round's last model call. A wrong answer is a
        correction carrying the round's feedback text; with ``learn="feedback"`` it becomes a
        skill at once (no LLM), with ``learn="evolver"`` the evolver sees it at the day's end."""
        if self.engine is None or not result.trajectory_ids:
            return []
        tid = result.trajectory_ids[-1]
        value = round(2.0 * result.score - 1.0, 6)
        if result.score >= 1.0:
            self.engine.feedback(tid, value, source="user", detail=result.feedback)
            return []
        self.engine.feedback(tid, value, source="correction", detail=result.feedback)
        self._failed_today.append(tid)
        if self.config.learn != "feedback":
            return []
        self.engine.flush(30)
        from metaclaw_core.evolve.loop import evolver_of

        try:
            report = evolver_of(self.engine).from_corrections(
                trajectory_ids=[tid], trigger=f"bench: {result.day}/{result.round}"
            )
        except MetaClawError as exc:
            return [{"mode": "feedback", "round": result.round, "error": str(exc)}]
        return [{"round": result.round, **_evolution(report)}]

    def _end_of_day(self, day: Day) -> list[dict[str, Any]]:
        failed, self._failed_today = self._failed_today, []
        if self.engine is None or self.config.learn != "evolver":
            return []
        from metaclaw_core.evolve.loop import evolver_of

        self.engine.flush(30)
        try:
            report = evolver_of(self.engine).evolve(
                trigger=f"bench: end of {day.id}", prefer=failed
            )
        except MetaClawError as exc:  # a broken or unreachable evolver: the run goes on
            return [{"mode": "llm", "trigger": f"end of {day.id}", "error": str(exc)}]
        return [{"trigger": f"end of {day.id}", **_evolution(report)}]

    def _train_after_day(self, day: Day) -> dict[str, Any]:
        """GRPO steps on the day's calls while "the user sleeps"; the agent gets the new
        weights for the next day (published by the trainer, swapped without a restart)."""
        self.engine.flush(30)
        trainer = self.slow.trainer
        before = self.slow.policy.current().label
        steps: list[dict[str, Any]] = []
        error = None
        try:
            for _ in range(self.config.train_steps_per_day):
                report = trainer.step()
                steps.append({k: v for k, v in asdict(report).items() if k != "rewards"})
            trainer.checkpoint()
        except Exception as exc:  # a failing step: recorded, the run goes on
            error = f"{type(exc).__name__}: {exc}"
        out: dict[str, Any] = {
            "backend": self.slow.backend.name,
            "steps": steps,
            "weights_before": before,
            "weights_after": self.slow.policy.current().label,
        }
        return out if error is None else {**out, "error": error}


def _progress_of(
    progress: Callable[[str, int, int], None] | None, day: str, before: int, total: int
) -> Callable[[int], None]:
    def tick(n: int) -> None:
        if progress is not None:
            progress(day, before + n, total)

    return tick


def _evolution(report: Any) -> dict[str, Any]:
    return {
        "mode": report.mode,
        "live": report.live,
        "pending": report.pending,
        "rejected": [
            {"name": c.skill.name, "reasons": list(c.reasons)}
            for c in report.candidates
            if c.verdict == "rejected"
        ],
        "generation": None if report.generation is None else report.generation.number,
        "message": report.message,
        "proposed": len(report.candidates),
        "quarantined": report.quarantined,
        "validation": {
            c.skill.name: {
                "state": c.validation.state,
                "fixed": c.validation.fixed,
                "regressed": c.validation.regressed,
                "calls": c.validation.calls,
            }
            for c in report.candidates
            if c.validation is not None
        },
    }
