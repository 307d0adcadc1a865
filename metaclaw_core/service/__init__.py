"""``metaclaw serve``: the engine over HTTP and an OpenAI-compatible proxy (FastAPI + uvicorn).

FastAPI, uvicorn and httpx are imported only by the modules of this package, and the names
below are resolved on first use, so neither the hot path of a Python host nor the CLI's other
commands pay for them. ``create_app`` builds the app; ``run_service`` serves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaclaw_core.lazy import lazy_exports

if TYPE_CHECKING:
    from metaclaw_core.hosts import is_loopback
    from metaclaw_core.service.app import create_app
    from metaclaw_core.service.auth import check_bind
    from metaclaw_core.service.server import run_service

_HOMES = {
    "create_app": "metaclaw_core.service.app",
    "check_bind": "metaclaw_core.service.auth",
    "is_loopback": "metaclaw_core.hosts",
    "run_service": "metaclaw_core.service.server",
}

__all__ = ["check_bind", "create_app", "is_loopback", "run_service"]


__getattr__ = lazy_exports(__name__, _HOMES)
