"""The one OpenAI-compatible client factory of the learning loops (evolver, judge).

Each role has its own endpoint settings (``[evolver]``, ``[judge]``). Requests carry a
per-attempt timeout and are retried with exponential back-off on 429, 5xx, dropped
connections and timeouts, within an optional overall deadline. Nothing here runs on the hot
path. The API key is only ever handed to the SDK: it is never logged or put in an error.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from metaclaw_core.config import LLMEndpointSettings
from metaclaw_core.errors import MetaClawError

if TYPE_CHECKING:  # the SDK is imported where it is first used (a slow import)
    import openai

log = logging.getLogger("metaclaw.llm")

Role = Literal["evolver", "judge"]
_FALLBACK = {"json_schema": "json_object", "json_object": "off", "off": "off"}


class LLMError(MetaClawError):
    """A learning role's LLM could not give a usable answer."""


class LLMNotConfiguredError(LLMError):
    """The role has no endpoint configured."""


class LLMUnavailableError(LLMError):
    """The endpoint failed (HTTP error, time-out, connection) after the retries."""


class LLMReplyError(LLMError):
    """The endpoint answered, but not with what was asked for (not JSON, wrong schema)."""


def not_configured_message(role: str, hint: str = "") -> str:
    return (
        f"metaclaw: no LLM configured for the {role}; set METACLAW_{role.upper()}__BASE_URL "
        f"(and METACLAW_{role.upper()}__MODEL){hint}"
    )


@dataclass(frozen=True)
class ChatReply:
    """The text of one completion and what the server said about it."""

    text: str
    model: str
    attempts: int
    structured_output: str


class LLMClient:
    """Chat completions for one role, with timeouts, retries and structured-output fallback."""

    def __init__(self, role: str, settings: LLMEndpointSettings) -> None:
        self.role = role
        self.settings = settings
        self._structured = settings.structured_output
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return bool(self.settings.base_url)

    def _sdk(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                if not self.settings.base_url:
                    raise LLMNotConfiguredError(not_configured_message(self.role))
                import openai

                self._client = openai.OpenAI(
                    base_url=self.settings.base_url,
                    # Local servers need no key, but the SDK insists on a non-empty one.
                    api_key=self.settings.resolved_api_key() or "not-set",
                    timeout=self.settings.timeout_s,
                    max_retries=0,  # retried here: our back-off, our deadline
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _where(self) -> str:
        return f"the {self.role} LLM at {self.settings.base_url}"

    def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
        deadline: float | None = None,
        timeout_s: float | None = None,
    ) -> ChatReply:
        """One completion. ``deadline`` (``time.monotonic()`` value) bounds every retry.

        Raises :class:`LLMNotConfiguredError` or :class:`LLMUnavailableError`.
        """
        client = self._sdk()
        import openai

        s = self.settings
        attempt = 0
        delay = s.backoff_s
        while True:
            attempt += 1
            per_try = timeout_s or s.timeout_s
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0.05:
                    raise LLMUnavailableError(
                        f"metaclaw: {self._where()} did not answer before the deadline"
                    )
                per_try = min(per_try, left)
            mode = self._structured if json_schema is not None else "off"
            kwargs: dict[str, Any] = {}
            if mode == "json_schema" and json_schema is not None:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": json_schema, "strict": True},
                }
            elif mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            try:
                resp = client.chat.completions.create(
                    model=s.model,
                    messages=list(messages),  # type: ignore[arg-type]
                    temperature=s.temperature,
                    max_tokens=s.max_tokens,
                    timeout=per_try,
                    **kwargs,
                )
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if mode != "off":
                    # The server may not know this response_format: fall back and remember.
                    log.info(
                        "metaclaw: %s refused response_format %s; falling back", self.role, mode
                    )
                    self._structured = _FALLBACK[mode]  # type: ignore[assignment]
                    attempt -= 1
                    continue
                raise LLMUnavailableError(
                    f"metaclaw: {self._where()} rejected the request ({exc.status_code}): "
                    f"{_short(exc)}; check METACLAW_{self.role.upper()}__MODEL"
                ) from None
            except openai.AuthenticationError:
                raise LLMUnavailableError(
                    f"metaclaw: {self._where()} refused the API key (401); set "
                    f"METACLAW_{self.role.upper()}__API_KEY or {s.api_key_env}"
                ) from None
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIConnectionError,  # includes APITimeoutError
            ) as exc:
                if (
                    mode != "off"
                    and isinstance(exc, openai.InternalServerError)
                    and "response_format" in str(exc)
                ):
                    # llama-cpp-python's server answers an unknown response_format with a 500
                    # naming it (a validation error), not a 400: the same refusal.
                    log.info(
                        "metaclaw: %s refused response_format %s (HTTP 500); falling back",
                        self.role,
                        mode,
                    )
                    self._structured = _FALLBACK[mode]  # type: ignore[assignment]
                    attempt -= 1
                    continue
                wait = _retry_after(exc, delay, s.backoff_max_s)
                late = deadline is not None and time.monotonic() + wait >= deadline
                if attempt > s.max_retries or late:
                    raise LLMUnavailableError(
                        f"metaclaw: {self._where()} failed after {attempt} attempt(s): "
                        f"{_describe(exc)}; check that it is running and reachable"
                    ) from None
                log.info("metaclaw: %s LLM: %s; retrying in %.1fs", self.role, _describe(exc), wait)
                time.sleep(wait)
                delay = min(max(delay, 0.001) * 2, s.backoff_max_s)
                continue
            except openai.APIStatusError as exc:
                raise LLMUnavailableError(
                    f"metaclaw: {self._where()} answered HTTP {exc.status_code}: {_short(exc)}"
                ) from None
            choices = getattr(resp, "choices", None) or []
            text = (choices[0].message.content or "") if choices else ""
            return ChatReply(
                text=text,
                model=str(resp.model or s.model),
                attempts=attempt,
                structured_output=mode,
            )

    def chat_json(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_schema: dict[str, Any],
        schema_name: str = "reply",
        deadline: float | None = None,
        timeout_s: float | None = None,
    ) -> tuple[Any, ChatReply]:
        """A completion parsed as JSON (code fences and surrounding prose are tolerated)."""
        reply = self.chat(
            messages,
            json_schema=json_schema,
            schema_name=schema_name,
            deadline=deadline,
            timeout_s=timeout_s,
        )
        try:
            return extract_json(reply.text), reply
        except ValueError as exc:
            raise LLMReplyError(
                f"metaclaw: {self._where()} did not answer with JSON ({exc}); its reply began "
                f"{reply.text[:120]!r}. Try a model that follows instructions better "
                f"(METACLAW_{self.role.upper()}__MODEL)"
            ) from None


def _short(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc.message)[:300]


def _describe(exc: Exception) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} ({_short(exc)})"
    if isinstance(exc, openai.APIConnectionError):
        return "connection failed"
    return type(exc).__name__


def _retry_after(exc: Exception, delay: float, cap: float) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if header:
        try:
            return min(max(float(header), 0.0), cap)
        except ValueError:
            pass
    return min(delay * (1.0 + 0.25 * random.random()), cap)


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model's reply: bare, in a code fence, or after prose.

    Raises ``ValueError`` if there is none.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply is empty")
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    # Fenced blocks first (```json ... ```), then the first decodable object or array.
    for part in stripped.split("```")[1::2]:
        tag, _, rest = part.partition("\n")
        body = rest if rest and (not tag.strip() or tag.strip().isalnum()) else part
        try:
            return json.loads(body.strip())
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for i, ch in enumerate(stripped):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(stripped, i)
                return value
            except ValueError:
                continue
    raise ValueError("no JSON object found in the reply")
