"""Which agent a request is for, and whether its token may act for that agent.

The agent comes from the header ``X-MetaClaw-Agent`` or, for clients that can set only a base
URL, from a path prefix: ``/agents/{id}/v1/chat/completions`` is ``/v1/chat/completions`` for
agent ``id`` (every route takes the prefix: the proxies, the API, the dashboard's data). A
request that names none is for the engine's agent, or, under a token limited to exactly one
agent, for that agent. The header is consumed here, so the proxies never send it upstream.

A token from ``service.agent_tokens`` covers only its agents: a request for any other agent is
refused with 403 before a route runs (skills, trajectories, evidence, dashboard data, proxies);
the service token (``service.token``) covers every agent.
"""

from __future__ import annotations

import os
import re
from typing import Any

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from metaclaw_core.agents import DEFAULT_AGENT, validate_agent
from metaclaw_core.config import Settings
from metaclaw_core.errors import ConfigError
from metaclaw_core.service.errors import error_bytes

HEADER = b"x-metaclaw-agent"
POLICY_AGENT_HEADER = HEADER  # what the proxy sends the in-process policy upstream (only it)
STATE_AGENT = "metaclaw_agent"  # request.state: the agent the request is for
STATE_ALLOWED = "metaclaw_agents"  # request.state: the agents its token covers (None: all)
_PREFIX = re.compile(r"^/agents/([^/]+)(/.*)$")


def agent_tokens(settings: Settings) -> dict[str, frozenset[str]]:
    """``service.agent_tokens`` resolved: token → the agents it covers. A key ``env:NAME``
    is the value of environment variable NAME; a missing variable is a ConfigError."""
    out: dict[str, frozenset[str]] = {}
    for key, agents in settings.service.agent_tokens.items():
        token = key
        if key.startswith("env:"):
            token = os.environ.get(key[4:], "")
            if not token:
                raise ConfigError(
                    f"metaclaw: service.agent_tokens names {key!r} but the environment "
                    f"variable {key[4:]} is not set"
                )
        if len(token) < 16:
            raise ConfigError(
                "metaclaw: a token of service.agent_tokens is shorter than 16 characters"
            )
        out[token] = frozenset(validate_agent(a) for a in agents)
    return out


def request_agent(request: Request) -> str:
    """The agent a request is for (set by :class:`AgentScope`; an app without it: the
    engine's agent)."""
    agent = getattr(request.state, STATE_AGENT, None)
    if agent is None:
        state = getattr(request.app.state, "metaclaw", None)
        agent = getattr(getattr(state, "engine", None), "agent", None) or DEFAULT_AGENT
    return str(agent)


class AgentScope:
    """ASGI middleware: the request's agent from the header or path prefix; 403 when the
    token (recorded by :class:`~metaclaw_core.service.auth.BearerAuth`) does not cover it."""

    def __init__(self, app: ASGIApp, default_agent: str) -> None:
        self.app = app
        self.default_agent = default_agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        named: list[str] = []
        headers = []
        for name, value in scope.get("headers", ()):
            if name == HEADER:
                named.append(value.decode("latin-1"))
            else:
                headers.append((name, value))
        m = _PREFIX.match(scope["path"])
        if m:
            named.append(m.group(1))
            scope["path"] = m.group(2)
            scope["raw_path"] = m.group(2).encode()
        scope["headers"] = headers
        allowed: frozenset[str] | None = state.get(STATE_ALLOWED)
        try:
            agents = {validate_agent(a) for a in named}
        except ConfigError as exc:
            await _refuse(send, 400, str(exc), "invalid_agent", scope)
            return
        if len(agents) > 1:
            await _refuse(
                send,
                400,
                f"the request names two agents ({', '.join(sorted(agents))}): the header "
                "X-MetaClaw-Agent and the path prefix /agents/{id} must agree",
                "invalid_agent",
                scope,
            )
            return
        if agents:
            agent = agents.pop()
        elif allowed is not None and len(allowed) == 1:
            agent = next(iter(allowed))  # a token for one agent speaks for it
        else:
            agent = self.default_agent
        if allowed is not None and agent not in allowed:
            await _refuse(
                send,
                403,
                f"this token does not cover agent {agent!r}",
                "agent_forbidden",
                scope,
            )
            return
        state[STATE_AGENT] = agent
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str, code: str, scope: Scope) -> None:
    body = error_bytes(
        message,
        type="permission_error" if status == 403 else "invalid_request_error",
        code=code,
        path=scope.get("path"),
    )
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
