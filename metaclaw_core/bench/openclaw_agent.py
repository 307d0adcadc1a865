"""The optional benchmark agent: a real OpenClaw, one headless turn per round.

``metaclaw bench run SUITE --agent openclaw`` answers each round with
``openclaw agent --local --agent main --session-id S --message … --json --timeout N``, the
Node 24 + ``openclaw`` install of ``scripts/setup-openclaw.sh`` (``.cache/openclaw``, or
``$METACLAW_OPENCLAW_CACHE``). What it is given:

* **Its own HOME** (``RUN/openclaw-home``; temp files under it too): the user's own
  ``~/.openclaw`` is never read or written. ``OPENCLAW_*`` variables are not passed on.
* **The day's workspace** as ``agents.defaults.workspace`` (rewritten before each round),
  with ``tools.fs.workspaceOnly``; only the file tools ``read``, ``write``, ``edit`` and
  ``apply_patch`` are allowed (``tools.allow``) and the groups that run commands or reach the
  network — runtime (exec), web, ui (browser), nodes, automation, messaging, sessions,
  memory, media, agents, plugin tools — are denied (``tools.deny``). OpenClaw's bundled
  skills are off (``agents.defaults.skills: []``, as in the paper's config), Tool Search is off
  (the tool schemas are sent directly) and no update checks are made.
* **The bench's model** (``--base-url``/``--model``) as the provider ``bench``, through a
  recording pass-through on loopback: every model call of the turn is forwarded unchanged
  (the API key is added there, so it is never written to disk) and recorded, which gives the
  round's transcript, its tool calls (the :class:`ActionLog`, with attempts to leave the
  workspace as escapes), the number of model calls and the tools OpenClaw actually offered.
* In ``skills``/``full`` modes, **the MetaClaw plugin** (``integrations/openclaw``, linked with
  ``openclaw plugins install --link`` and granted conversation access, as
  ``metaclaw openclaw install`` does) talking to the service app built around the run's own
  engine (:func:`metaclaw_core.service.app.create_app`) on 127.0.0.1: the skills it injects
  and the turns it captures are the run's. In ``baseline`` the plugin is not installed.

The previous round's feedback is sent as **a prior turn in the same OpenClaw session** (the
LangChain agent's feedback message, asking for a short acknowledgement), then the question as
the next turn: the model sees the feedback in its history, and the question's turn — whose
text the plugin retrieves skills for and whose capture the round's score rates — is the
question alone.

A turn that fails (model error, time-out, OpenClaw error) gives an empty answer and the error;
it never raises.
"""

from __future__ import annotations

import json
import math
import os
import platform
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaclaw_core.bench.agent import FEEDBACK_PREFIX, AgentResult, ModelConfig
from metaclaw_core.bench.workspace import ActionLog
from metaclaw_core.errors import MetaClawError
from metaclaw_core.wire.openai_format import content_text

SETUP_SCRIPT = "scripts/setup-openclaw.sh"
REPO_ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "bench"
ALLOWED_TOOLS = ("read", "write", "edit", "apply_patch")
DENIED_TOOLS = (
    "group:runtime",
    "group:web",
    "group:ui",
    "group:nodes",
    "group:automation",
    "group:messaging",
    "group:sessions",
    "group:memory",
    "group:media",
    "group:agents",
    "group:plugins",
)
WRITE_TOOLS = {"write", "edit", "apply_patch"}
FEEDBACK_SUFFIX = "\n\nKeep it in mind for the next task; a short acknowledgement is enough."
DEFAULT_CONTEXT_WINDOW = 32768
MIN_CONTEXT_WINDOW = 16384
TURN_GRACE_S = 120.0  # OpenClaw's own start (plugins, config) on top of --timeout
CAPTURE_WAIT_S = 5.0
MAX_RECORDED_BYTES = 8_000_000


class OpenClawMissing(MetaClawError):
    """Node 24 and the openclaw package are not installed."""


@dataclass(frozen=True)
class OpenClawInstall:
    node_bin: Path  # the folder holding Node 24's `node`
    openclaw: Path  # the openclaw executable

    @property
    def version(self) -> str | None:
        pkg = self.openclaw.resolve().parent / "package.json"
        try:
            return str(json.loads(pkg.read_text(encoding="utf-8"))["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def find_openclaw() -> OpenClawInstall:
    """The Node 24 + openclaw install of ``scripts/setup-openclaw.sh``, or a clear error."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    explicit = os.environ.get("METACLAW_OPENCLAW_CACHE")
    caches = (
        [Path(explicit).expanduser()]
        if explicit
        else [REPO_ROOT / ".cache" / "openclaw", Path.cwd() / ".cache" / "openclaw"]
    )
    for cache in caches:
        install = OpenClawInstall(
            node_bin=cache / "node" / "node_modules" / f"node-linux-{arch}" / "bin",
            openclaw=cache / "app" / "node_modules" / ".bin" / "openclaw",
        )
        if (install.node_bin / "node").is_file() and install.openclaw.exists():
            return install
    raise OpenClawMissing(
        f"--agent openclaw needs Node 24 and OpenClaw, which are not installed in "
        f"{caches[0]}; install them with `bash {SETUP_SCRIPT}` (npm is needed, about a minute)"
        + ("" if explicit else ", or point METACLAW_OPENCLAW_CACHE at such an install")
    )


# -- the model calls of a turn, recorded on their way through --------------------------------


@dataclass
class ModelCall:
    request: dict[str, Any]
    status: int | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    error: str | None = None
    finished: bool = False  # False: still running (or abandoned) when the turn ended


class ModelRecorder:
    """A loopback pass-through to the bench's model endpoint that records each call."""

    def __init__(self, upstream: str, api_key: str, timeout_s: float) -> None:
        from metaclaw_core.service.server import ThreadedServer

        self.upstream = upstream.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._calls: list[ModelCall] = []
        self._lock = threading.Lock()
        self.server = ThreadedServer(self._app()).start()

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"

    def take(self) -> list[ModelCall]:
        """The calls recorded since the last ``take``."""
        with self._lock:
            calls, self._calls = self._calls, []
        return calls

    def stop(self) -> None:
        self.server.stop()

    def _record(self, call: ModelCall) -> None:
        """Recorded as it starts: a call still running when its turn ends belongs to it."""
        with self._lock:
            self._calls.append(call)

    def _app(self) -> Any:
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        from metaclaw_core.wire.openai_format import StreamAccumulator, output_from_completion

        recorder = self

        def done(call: ModelCall, output: Any) -> None:
            call.text = output.text
            call.tool_calls = [
                {"name": c.name, "arguments": c.arguments} for c in output.tool_calls
            ]
            call.finish_reason = output.finish_reason
            call.finished = True

        async def forward(request: Request) -> Response:
            path = request.url.path.removeprefix("/v1")
            body = await request.body()
            call: ModelCall | None = None
            if request.method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = {}
                call = ModelCall(request=parsed if isinstance(parsed, dict) else {})
                recorder._record(call)
            headers = {
                "content-type": request.headers.get("content-type", "application/json"),
                "accept": request.headers.get("accept", "application/json"),
                "authorization": f"Bearer {recorder.api_key}",
            }
            client = httpx.AsyncClient(timeout=httpx.Timeout(recorder.timeout_s, connect=30.0))
            try:
                upstream = await client.send(
                    client.build_request(
                        request.method, recorder.upstream + path, content=body, headers=headers
                    ),
                    stream=True,
                )
            except httpx.HTTPError as exc:
                await client.aclose()
                if isinstance(exc, httpx.TimeoutException):
                    message = f"no answer from the model endpoint in {recorder.timeout_s:g} s"
                else:
                    message = f"model endpoint unreachable: {type(exc).__name__}: {exc}"
                if call is not None:
                    call.error, call.finished = message, True
                return JSONResponse(
                    {"error": {"message": message, "type": "upstream_error"}}, status_code=502
                )
            media = upstream.headers.get("content-type", "application/json")
            if call is not None:
                call.status = upstream.status_code
            if upstream.status_code >= 400 or not media.startswith("text/event-stream"):
                try:
                    raw = await upstream.aread()
                finally:
                    await upstream.aclose()
                    await client.aclose()
                if call is not None:
                    if upstream.status_code >= 400:
                        said = raw[:500].decode("utf-8", "replace")
                        call.error = f"model endpoint answered {upstream.status_code}: {said}"
                        call.finished = True
                    else:
                        try:
                            done(call, output_from_completion(json.loads(raw)))
                        except ValueError:
                            call.error, call.finished = "the model's answer is not JSON", True
                return Response(raw, status_code=upstream.status_code, media_type=media)

            acc = StreamAccumulator(MAX_RECORDED_BYTES)

            async def stream() -> AsyncIterator[bytes]:
                try:
                    async for chunk in upstream.aiter_bytes():
                        acc.feed(chunk)
                        yield chunk
                except httpx.HTTPError as exc:
                    if call is not None:
                        call.error = f"the model's stream broke: {type(exc).__name__}: {exc}"
                except BaseException:
                    if call is not None:
                        call.error = "OpenClaw left before the model's answer ended"
                    raise
                finally:
                    await upstream.aclose()
                    await client.aclose()
                    if call is not None:
                        if acc.error and call.error is None:
                            call.error = f"the model's stream reported an error: {acc.error}"
                        done(call, acc.output())

            return StreamingResponse(stream(), status_code=upstream.status_code, media_type=media)

        return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


# -- reading a turn back ------------------------------------------------------------------------


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {"raw": raw}
    return parsed if isinstance(parsed, dict) else {"raw": parsed}


def _calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for c in message.get("tool_calls") or []:
        fn = (c.get("function") or {}) if isinstance(c, dict) else {}
        out.append({"name": str(fn.get("name", "")), "args": _args(fn.get("arguments"))})
    return out


def transcript_of(calls: list[ModelCall]) -> list[dict[str, Any]]:
    """The conversation as the model last saw it (without the system prompt), then its last
    answer; roles named as in the LangChain agent's transcript (human, ai, tool)."""
    if not calls:
        return []
    last = calls[-1]
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in last.request.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") in ("system", "developer"):
            continue
        role = {"user": "human", "assistant": "ai"}.get(str(m.get("role")), str(m.get("role")))
        entry: dict[str, Any] = {"role": role, "content": content_text(m.get("content"))}
        tool_calls = _calls_of(m)
        if tool_calls:
            entry["tool_calls"] = tool_calls
            for raw, c in zip(m.get("tool_calls") or [], tool_calls, strict=False):
                if isinstance(raw, dict) and raw.get("id"):
                    names[str(raw["id"])] = c["name"]
        if role == "tool":
            entry["tool"] = names.get(str(m.get("tool_call_id")))
        out.append(entry)
    if last.finished and (last.error is None or last.text or last.tool_calls):
        entry = {"role": "ai", "content": last.text}
        if last.tool_calls:
            entry["tool_calls"] = [
                {"name": c["name"], "args": _args(c["arguments"])} for c in last.tool_calls
            ]
        out.append(entry)
    return out


def _patch_paths(patch: str) -> list[str]:
    paths = []
    for line in patch.splitlines():
        for head in ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"):
            if line.startswith(head):
                paths.append(line[len(head) :].strip())
    return paths


def _outside(workspace: Path, raw: str) -> bool:
    p = Path(raw).expanduser()
    target = p if p.is_absolute() else workspace / p
    return not target.resolve().is_relative_to(workspace.resolve())


def record_actions(transcript: list[dict[str, Any]], workspace: Path, log: ActionLog) -> None:
    """The turn's tool calls (with their results) into ``log``; a path outside the workspace
    is an escape (a write there scores the round 0), even though OpenClaw refused it."""
    pending: list[dict[str, Any]] = []
    for entry in transcript:
        if entry["role"] == "ai":
            for c in entry.get("tool_calls", []):
                action = {"tool": c["name"], "args": c["args"], "result": ""}
                log.actions.append(action)
                pending.append(action)
                args = c["args"]
                paths = [
                    str(args[k]) for k in ("path", "file_path") if isinstance(args.get(k), str)
                ]
                if c["name"] == "apply_patch" and isinstance(args.get("input"), str):
                    paths += _patch_paths(args["input"])
                kind = "write" if c["name"] in WRITE_TOOLS else "read"
                for path in paths:
                    if path.strip() and _outside(workspace, path):
                        log.escapes.append({"kind": kind, "path": path})
        elif entry["role"] == "tool" and pending:
            pending.pop(0)["result"] = str(entry.get("content", ""))[:2000]


# -- the agent ----------------------------------------------------------------------------------


@dataclass
class Turn:
    kind: str  # "feedback" | "question"
    answer: str = ""
    error: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    calls: list[ModelCall] = field(default_factory=list)
    trajectory_id: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "exit_code": self.exit_code,
            "seconds": self.seconds,
            "model_calls": len(self.calls),
            "error": self.error,
            "trajectory_id": self.trajectory_id,
        }


def _parse_output(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    start = text.find("{")
    while start != -1:
        try:
            data = json.loads(text[start:])
        except ValueError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
            continue
        return data if isinstance(data, dict) else None
    return None


def read_turn(turn: Turn, code: int, stdout: str, stderr: str) -> None:
    """The answer (the final assistant text of ``--json``) or the error of a finished turn."""
    turn.exit_code = code
    data = _parse_output(stdout)
    payloads = [p for p in (data or {}).get("payloads") or [] if isinstance(p, dict)]
    texts = [str(p["text"]) for p in payloads if p.get("text") and not p.get("isError")]
    errors = [str(p["text"]) for p in payloads if p.get("text") and p.get("isError")]
    turn.answer = "\n\n".join(texts).strip()
    failed = [c.error for c in turn.calls if c.error]
    said = (data or {}).get("error")
    if isinstance(said, dict):
        errors.append(str(said.get("message") or said))
    if code != 0 or errors or data is None:
        why = "; ".join(errors)
        if not why:
            tail = (stderr.strip() or stdout.strip())[-500:]
            why = tail if data is not None else "no JSON output" + (f": {tail}" if tail else "")
        turn.error = f"openclaw exited with {code}: {why}" if code else why
        if failed:
            turn.error += f" (model: {failed[-1]})"
        turn.error = turn.error[:1000]


class OpenClawAgent:
    """One OpenClaw turn per round (after a feedback turn when there is feedback)."""

    def __init__(
        self,
        config: ModelConfig,
        engine: Any | None,
        run_dir: Path,
        *,
        install: OpenClawInstall | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        turn_grace_s: float = TURN_GRACE_S,
    ) -> None:
        self.install = install or find_openclaw()
        self.config = config
        self.engine = engine
        self.context_window = context_window
        self.turn_grace_s = turn_grace_s
        self.home = (run_dir / "openclaw-home").resolve()
        self.config_path = self.home / ".openclaw" / "openclaw.json"
        self.tmp = self.home / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.recorder: ModelRecorder | None = None
        self.service: Any = None
        self.service_state: Any = None
        try:
            self.recorder = ModelRecorder(config.base_url, config.api_key, config.timeout_s)
            self._write_config(self._base_config(self.home / "workspace"))
            if engine is not None:
                self._start_service(engine)
                self._install_plugin(engine)
        except BaseException:
            self.close()
            raise

    # -- setup ------------------------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENCLAW_", "METACLAW_", "NODE_"))
        }
        env.update(
            HOME=str(self.home),
            TMPDIR=str(self.tmp),
            PATH=f"{self.install.node_bin}{os.pathsep}{env.get('PATH', '')}",
            NO_COLOR="1",
            OPENCLAW_NO_AUTO_UPDATE="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        return env

    def _base_config(self, workspace: Path) -> dict[str, Any]:
        model = self.config.model
        ref = f"{PROVIDER}/{model}"
        return {
            "models": {
                "mode": "merge",
                "providers": {
                    PROVIDER: {
                        "baseUrl": self.recorder.base_url if self.recorder else "",
                        "apiKey": "recorded-pass-through",  # the real key is added there
                        "api": "openai-completions",
                        "models": [
                            {
                                "id": model,
                                "name": model,
                                "reasoning": False,
                                "input": ["text"],
                                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                                "contextWindow": self.context_window,
                                "maxTokens": self.config.max_tokens,
                            }
                        ],
                    }
                },
            },
            "agents": {
                "defaults": {
                    "model": {"primary": ref},
                    "models": {ref: {"params": {"temperature": self.config.temperature}}},
                    "workspace": str(workspace),
                    "repoRoot": str(workspace),
                    "skipBootstrap": True,
                    "skills": [],
                }
            },
            "tools": {
                "allow": list(ALLOWED_TOOLS),
                "deny": list(DENIED_TOOLS),
                "toolSearch": False,
                "fs": {"workspaceOnly": True},
                "elevated": {"enabled": False},
            },
            "update": {"checkOnStart": False},
        }

    def _read_config(self) -> dict[str, Any]:
        from metaclaw_core.service.openclaw import read_config

        return read_config(self.config_path)

    def _write_config(self, config: dict[str, Any]) -> None:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_name(f".{self.config_path.name}.tmp")
        tmp.write_text(json.dumps(config, indent=2), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.config_path)

    def _configure(self, workspace: Path) -> None:
        """Point OpenClaw at this round's workspace (the rest as OpenClaw and we left it)."""
        config = self._read_config()
        base = self._base_config(workspace)
        for key in ("models", "tools", "update"):
            config[key] = base[key]
        agents = config.setdefault("agents", {})
        agents["defaults"] = {**agents.get("defaults", {}), **base["agents"]["defaults"]}
        entry = config.get("plugins", {}).get("entries", {}).get("metaclaw")
        if self.engine is None and isinstance(entry, dict):
            entry["enabled"] = False  # baseline: never MetaClaw
        self._write_config(config)

    def _start_service(self, engine: Any) -> None:
        """The service app around the run's engine, on 127.0.0.1, for the plugin."""
        from metaclaw_core.service.app import create_app
        from metaclaw_core.service.server import ThreadedServer

        settings = engine.settings.model_copy(deep=True)
        settings.service.host = "127.0.0.1"
        app = create_app(engine, settings, own_engine=False)
        self.service_state = app.state.metaclaw
        self.service = ThreadedServer(app, lifespan="on").start()

    def _install_plugin(self, engine: Any) -> None:
        from metaclaw_core.service.openclaw import (
            apply_plugin_entry,
            find_plugin_dir,
            link_with_openclaw,
        )

        plugin_dir = find_plugin_dir()
        link_with_openclaw(str(self.install.openclaw), plugin_dir, env=self.env)
        plugin_config: dict[str, Any] = {"serviceUrl": self.service.url}
        token = engine.settings.service.token
        if token is not None:
            plugin_config["token"] = token.get_secret_value()
        config = self._read_config()
        apply_plugin_entry(config, plugin_dir=plugin_dir, plugin_config=plugin_config)
        self._write_config(config)

    def close(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service = None
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None

    # -- a round ----------------------------------------------------------------------------
    def run(
        self,
        prompt: str,
        workspace: Path,
        log: ActionLog,
        session_id: str,
        feedback: str | None = None,
    ) -> AgentResult:
        started = time.monotonic()
        workspace = workspace.resolve()
        # A session of its own per attempt: a resumed day never continues an old conversation.
        session = f"{session_id}-{uuid.uuid4().hex[:8]}"
        turns: list[Turn] = []
        try:
            self._configure(workspace)
            if feedback:
                message = f"{FEEDBACK_PREFIX}{feedback}{FEEDBACK_SUFFIX}"
                turns.append(self._turn("feedback", session, message, workspace))
            question = self._turn("question", session, prompt, workspace)
            turns.append(question)
        except Exception as exc:  # our own setup (config file, process start): the round goes on
            question = Turn("question", error=f"{type(exc).__name__}: {exc}"[:500])
            turns.append(question)
        transcript = transcript_of(question.calls)
        record_actions(transcript, workspace, log)
        offered = sorted(
            {
                str((t.get("function") or {}).get("name"))
                for turn in turns
                for c in turn.calls
                for t in c.request.get("tools") or []
                if isinstance(t, dict)
            }
        )
        system = next(
            (
                content_text(m.get("content"))
                for c in question.calls[-1:]
                for m in c.request.get("messages") or []
                if isinstance(m, dict) and m.get("role") in ("system", "developer")
            ),
            "",
        )
        from metaclaw_core.models import BLOCK_START

        info: dict[str, Any] = {
            "name": "openclaw",
            "openclaw_version": self.install.version,
            "session_id": session,
            "tools_allowed": list(ALLOWED_TOOLS),
            "tools_denied": list(DENIED_TOOLS),
            "tools_offered": offered,
            "workspace_only": True,
            "metaclaw_plugin": self.engine is not None,
            "feedback": "a prior turn in the same session" if feedback else None,
            "system_prompt_chars": len(system),
            "skills_block": BLOCK_START in system,
            "turns": [t.summary() for t in turns],
        }
        return AgentResult(
            answer=question.answer,
            transcript=transcript,
            trajectory_ids=[question.trajectory_id] if question.trajectory_id else [],
            error=question.error,
            model_calls=sum(len(t.calls) for t in turns),
            seconds=round(time.monotonic() - started, 3),
            agent=info,
        )

    def _turn(self, kind: str, session: str, message: str, workspace: Path) -> Turn:
        assert self.recorder is not None, "the agent is closed"
        turn = Turn(kind)
        before = self._last_capture(session)
        timeout = max(1, math.ceil(self.config.timeout_s))
        cmd = [
            str(self.install.openclaw),
            "agent",
            "--local",
            "--agent",
            "main",
            "--session-id",
            session,
            "--message",
            message,
            "--json",
            "--timeout",
            str(timeout),
        ]
        started = time.monotonic()
        self.recorder.take()  # nothing of an earlier turn
        proc = subprocess.Popen(
            cmd,
            cwd=workspace,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, killed whole on a hang
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout + self.turn_grace_s)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            code = None
        except BaseException:  # Ctrl-C: its own session does not get the terminal's SIGINT
            _kill_group(proc)
            proc.wait()
            raise
        turn.seconds = round(time.monotonic() - started, 3)
        turn.calls = self.recorder.take()
        if code is None:
            turn.exit_code = None
            turn.error = f"openclaw turn killed after {turn.seconds:.0f} s (--timeout {timeout})"
        else:
            read_turn(turn, code, stdout, stderr)
        turn.trajectory_id = self._wait_capture(session, before)
        return turn

    def _last_capture(self, session: str) -> str | None:
        if self.service_state is None:
            return None
        last: str | None = self.service_state.ledger.last_trajectory(session)
        return last

    def _wait_capture(self, session: str, before: str | None) -> str | None:
        """The trajectory the plugin captured for the turn that just ended (its ``agent_end``
        is usually in before the process exits; a little grace otherwise)."""
        if self.service_state is None:
            return None
        deadline = time.monotonic() + CAPTURE_WAIT_S
        while True:
            last = self._last_capture(session)
            if last is not None and last != before:
                return last
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def openclaw_factory(
    run_dir: Path,
    *,
    install: OpenClawInstall | None = None,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    turn_grace_s: float = TURN_GRACE_S,
) -> Any:
    """An ``agent_factory`` for :class:`~metaclaw_core.bench.runner.BenchRun`."""

    def make(config: ModelConfig, engine: Any) -> OpenClawAgent:
        return OpenClawAgent(
            config,
            engine,
            run_dir,
            install=install,
            context_window=context_window,
            turn_grace_s=turn_grace_s,
        )

    return make
