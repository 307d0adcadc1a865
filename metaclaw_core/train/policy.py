"""The served policy: published sampler weights and their atomic swap.

:class:`PolicyServer` holds the current :class:`SamplerHandle`. A request *leases* the handle
that is current when it starts and keeps it to the end, so a publish in between never changes
the weights under it; new requests see the new handle at once. The old sampler is closed only
when its last lease ends. Publishing never waits for requests, and requests never wait for a
publish beyond one reference swap under a lock.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from metaclaw_core.errors import MetaClawError
from metaclaw_core.train.backend import PolicySampler, SamplingParams
from metaclaw_core.train.tokenize import ChatMessage, ChatTokenizer

log = logging.getLogger("metaclaw.train")


class PolicyNotReadyError(MetaClawError):
    """No weights have been published to the policy server yet."""


class SamplerHandle:
    """One published version of the weights, counted while requests use it."""

    def __init__(self, version: int, sampler: PolicySampler) -> None:
        self.version = version
        self.sampler = sampler
        self.label = sampler.label
        self.published_at = time.time()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._retired = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _acquire(self) -> None:
        with self._lock:
            self._in_flight += 1

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            close = self._retired and self._in_flight == 0 and not self._closed
            if close:
                self._closed = True
        if close:
            self._close_sampler()

    def _retire(self) -> None:
        with self._lock:
            self._retired = True
            close = self._in_flight == 0 and not self._closed
            if close:
                self._closed = True
        if close:
            self._close_sampler()

    def _close_sampler(self) -> None:
        try:
            self.sampler.close()
        except Exception as exc:  # a failed close must not fail the request that ended last
            log.warning("metaclaw: closing sampler %s failed: %s", self.label, exc)


@dataclass(frozen=True)
class PolicyCompletion:
    """The answer to one chat request."""

    texts: list[str]
    finish_reasons: list[str]
    prompt_tokens: int
    completion_tokens: int
    version: int
    label: str


class PolicyServer:
    """Serves chat completions from the newest published sampler; swaps atomically."""

    def __init__(
        self, tokenizer: ChatTokenizer | None = None, *, model_name: str = "metaclaw-policy"
    ) -> None:
        # None until the backend has loaded (the trainer sets it with the first publish).
        self.tokenizer = tokenizer
        self.model_name = model_name
        self._lock = threading.Lock()
        self._current: SamplerHandle | None = None
        self._versions = itertools.count(1)
        self.publishes = 0

    def current(self) -> SamplerHandle:
        """The handle new requests get (raises :class:`PolicyNotReadyError` before a publish)."""
        handle = self._current
        if handle is None:
            raise PolicyNotReadyError(
                "metaclaw: the trained policy has no weights yet; the trainer publishes them "
                "when it starts (see `metaclaw train status`)"
            )
        return handle

    @property
    def ready(self) -> bool:
        return self._current is not None

    def publish(self, sampler: PolicySampler) -> SamplerHandle:
        """Make ``sampler`` the one new requests use; the old one closes when its last
        request ends."""
        with self._lock:
            handle = SamplerHandle(next(self._versions), sampler)
            old, self._current = self._current, handle
            self.publishes += 1
        if old is not None:
            old._retire()
        log.info("metaclaw: serving policy v%d (%s)", handle.version, handle.label)
        return handle

    @contextmanager
    def lease(self) -> Iterator[SamplerHandle]:
        """Pin the current handle for the duration of one request."""
        with self._lock:
            handle = self.current()
            handle._acquire()
        try:
            yield handle
        finally:
            handle._release()

    def complete(
        self, messages: list[ChatMessage], params: SamplingParams, *, n: int = 1
    ) -> PolicyCompletion:
        """Generate ``n`` answers to ``messages`` (blocking: call from a worker thread)."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            self.current()  # raises PolicyNotReadyError before the first publish
            raise PolicyNotReadyError("metaclaw: the trained policy has no tokenizer yet")
        prompt = tokenizer.encode_chat(messages)
        with self.lease() as handle:
            completions = handle.sampler.sample(prompt, n, params)
        texts, reasons, used = [], [], 0
        for c in completions:
            text = tokenizer.decode(c.tokens)
            reason = "length" if c.stop_reason == "length" else "stop"
            for stop in params.stop:
                cut = text.find(stop)
                if cut >= 0:
                    text, reason = text[:cut], "stop"
            texts.append(text)
            reasons.append(reason)
            used += len(c.tokens)
        return PolicyCompletion(
            texts=texts,
            finish_reasons=reasons,
            prompt_tokens=len(prompt),
            completion_tokens=used,
            version=handle.version,
            label=handle.label,
        )

    def close(self) -> None:
        with self._lock:
            old, self._current = self._current, None
        if old is not None:
            old._retire()
