"""``metaclaw serve``: the engine over HTTP and an OpenAI-compatible proxy (FastAPI + uvicorn).

FastAPI, uvicorn and httpx are imported only here, so the hot path of a Python host never
pays for them. ``create_app`` builds the app; ``run_service`` serves it.
"""

from metaclaw_core.service.app import create_app
from metaclaw_core.service.auth import check_bind, is_loopback
from metaclaw_core.service.server import run_service

__all__ = ["check_bind", "create_app", "is_loopback", "run_service"]
