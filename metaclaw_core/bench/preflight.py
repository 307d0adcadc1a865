"""Never a silent zero: the benchmark's model endpoint is checked before the first round,
and a run stops when rounds keep failing on the model rather than on the task."""

from __future__ import annotations

import re

from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.errors import MetaClawError

MAX_MODEL_FAILURES = 3
"""Consecutive rounds that fail on the model (not on the task) before a run stops."""

# What the OpenAI SDK, httpx and the agents say when the model server, not the task, failed.
_MODEL_ERROR = re.compile(
    r"APIConnectionError|APITimeoutError|InternalServerError|ServiceUnavailable|"
    r"RateLimitError|AuthenticationError|NotFoundError|BadGatewayError|ConnectError|"
    r"Connection refused|Connection error|ReadTimeout|ConnectTimeout|RemoteProtocolError|"
    r"OpenAIAPIError|Error code: (?:5\d\d|401|403|404|429)\b|model server|model endpoint",
    re.I,
)


class ModelEndpointError(MetaClawError):
    """The benchmark's model endpoint cannot be used: the run does not start, or stops."""


def check_model_endpoint(model: ModelConfig, timeout_s: float = 10.0) -> None:
    """Raise :class:`ModelEndpointError` when nothing answers at ``model.base_url``.

    ``GET {base_url}/models``: any HTTP answer but 401/403 counts as up (some servers do
    not list models); a refused connection or a time-out does not.
    """
    import httpx

    url = model.base_url.rstrip("/") + "/models"
    headers = {}
    if model.api_key and model.api_key != "not-needed":
        headers["authorization"] = f"Bearer {model.api_key}"
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ModelEndpointError(
            f"metaclaw: the model endpoint {model.base_url} does not answer "
            f"({type(exc).__name__}: {exc}); start the model server (docs/benchmarks.md, "
            "'Offline, with a local model') or pass --base-url; nothing was run"
        ) from None
    if resp.status_code in (401, 403):
        raise ModelEndpointError(
            f"metaclaw: the model endpoint {model.base_url} refused the API key "
            f"(HTTP {resp.status_code}); set the variable --api-key-env names; nothing was run"
        )


def failed_on_model(error: str | None, model_calls: int) -> bool:
    """Whether a round's error is the model server's (not the task's, not the agent's)."""
    return bool(error) and _MODEL_ERROR.search(error or "") is not None and model_calls <= 1
