"""Who may call the service: the bind policy and the bearer-token check.

A loopback bind may run without a token; any other bind refuses to start without one. With a
token, every route but ``/healthz``, ``/readyz`` (probes: they say nothing but loaded or not)
and the dashboard's static files requires
``Authorization: Bearer <token>``. The token is compared in constant time and never logged.
Tokens of ``service.agent_tokens`` are accepted too, each for its agents only: which agents
the request's token covers is left in the request's state for
:class:`~metaclaw_core.service.agent_scope.AgentScope`, which refuses the others (403).
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from metaclaw_core.errors import ConfigError
from metaclaw_core.hosts import is_loopback
from metaclaw_core.service.errors import error_bytes

# The dashboard's page and files (dashboard.ASSETS) hold no data and load without the token so
# the page can ask for it; every route they call needs it.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/dashboard/app.js", "/dashboard/app.css"})


def check_bind(host: str, token: str | None) -> None:
    """Raise :class:`ConfigError` when ``host`` is not loopback and there is no token."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"metaclaw: refusing to listen on {host} without a token: anyone who can reach it "
            "could read your trajectories and change your skills. Set METACLAW_SERVICE__TOKEN "
            "(clients then send 'Authorization: Bearer <token>'), or bind 127.0.0.1."
        )


class BearerAuth:
    """ASGI middleware: 401 unless the request carries the service token or an agent token."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        agent_tokens: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.app = app
        # token → the agents it covers (None: every agent)
        self._tokens: list[tuple[bytes, frozenset[str] | None]] = []
        if token:
            self._tokens.append((token.encode(), None))
        for t, agents in (agent_tokens or {}).items():
            self._tokens.append((t.encode(), agents))

    def _authorised(self, scope: Scope) -> tuple[bool, frozenset[str] | None]:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                if scheme.lower() != b"bearer":
                    return False, None
                given = credentials.strip()
                found: tuple[bool, frozenset[str] | None] = (False, None)
                for token, agents in self._tokens:  # every one compared: constant time
                    if hmac.compare_digest(given, token) and not found[0]:
                        found = (True, agents)
                return found
        return False, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        ok, agents = self._authorised(scope)
        if ok:
            if agents is not None:
                scope.setdefault("state", {})["metaclaw_agents"] = agents
            await self.app(scope, receive, send)
            return
        body = error_bytes(
            "missing or wrong bearer token: send 'Authorization: Bearer <token>' with the "
            "token the service was started with (METACLAW_SERVICE__TOKEN)",
            type="authentication_error",
            code="invalid_token",
            path=scope.get("path"),
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="metaclaw"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
