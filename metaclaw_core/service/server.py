"""Running the app: bind first (so a busy port fails before the model loads), then serve
with uvicorn until SIGINT/SIGTERM, draining captures into the store on the way out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any, Literal, Self

import uvicorn

from metaclaw_core.config import Settings
from metaclaw_core.engine import MetaClaw
from metaclaw_core.service.app import create_app
from metaclaw_core.service.auth import check_bind


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (port 0: any free port)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class ThreadedServer:
    """An ASGI app served by uvicorn on 127.0.0.1 (an ephemeral port) on a daemon thread: the
    benchmark's policy endpoint, and the tests' live servers (real sockets, real HTTP)."""

    def __init__(self, app: Any, *, lifespan: Literal["on", "off"] = "off") -> None:
        self.app = app
        self.sock = bind_socket("127.0.0.1", 0)
        self.port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.sock]},
            name="metaclaw-uvicorn",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> Self:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


class _Server(uvicorn.Server):
    """uvicorn's server, stopping gracefully on SIGINT/SIGTERM and then exiting normally
    (uvicorn itself re-raises the signal once shut down, which kills the process)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {s: signal.signal(s, self._stop) for s in stops}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        self.handle_exit(sig, frame)


def run_service(settings: Settings, *, announce: bool = True) -> None:
    """Serve the API and proxy on ``settings.service.host:port`` until interrupted."""
    svc = settings.service
    check_bind(svc.host, svc.token.get_secret_value() if svc.token else None)
    sock = bind_socket(svc.host, svc.port)
    host, port = sock.getsockname()[:2]
    engine = MetaClaw(settings)
    slow_loop = None
    if settings.train.enabled:  # the slow loop trains in idle windows and serves its policy
        from metaclaw_core.train.runtime import SlowLoop

        slow_loop = SlowLoop(engine, settings)
        slow_loop.start()
    policies = slow_loop.policies if slow_loop is not None else None
    app = create_app(engine, settings, own_engine=True, policies=policies)
    app.state.slow_loop = slow_loop  # the dashboard's training panel reads it
    config = uvicorn.Config(
        app,
        log_level=svc.log_level,
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=10,
    )
    server = _Server(config)
    # httpx logs every upstream URL at INFO; a URL may carry credentials.
    logging.getLogger("httpx").setLevel(logging.WARNING)

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if server.started and announce:
            shown = f"[{host}]" if ":" in host else host
            print(
                f"metaclaw: serving on http://{shown}:{port} (API docs at /docs)",
                file=sys.stderr,
                flush=True,
            )
        await serving

    try:
        asyncio.run(main())
    finally:
        sock.close()
        if slow_loop is not None:
            slow_loop.close()
        engine.close()
