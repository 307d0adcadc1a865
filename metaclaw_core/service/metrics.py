"""The service's Prometheus metrics: counters, histograms and gauges in the text format.

A few dozen series do not need a client library: this module keeps them in memory under one
lock (updates come from the event loop and from worker threads) and renders exposition
format 0.0.4 for ``GET /metrics``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

LabelValues = tuple[str, ...]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help: str, labels: Sequence[str], lock: threading.Lock):
        self.name, self.help, self.label_names, self._lock = name, help, tuple(labels), lock

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._values: dict[LabelValues, float] = {}

    def inc(self, *labels: str, by: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + by

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {_number(v)}"
            for k, v in sorted(self._values.items())
        ]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        lock: threading.Lock,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help, labels, lock)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[LabelValues, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, *labels: str) -> None:
        with self._lock:
            counts, totals = self._series.setdefault(labels, ([0] * (len(self.buckets) + 1), [0.0]))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    counts[i] += 1
                    break
            else:
                counts[-1] += 1
            totals[0] += value

    def count(self, *labels: str) -> int:
        with self._lock:
            series = self._series.get(labels)
            return sum(series[0]) if series else 0

    def lines(self) -> list[str]:
        out: list[str] = []
        for labels, (counts, totals) in sorted(self._series.items()):
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                le = f'le="{_number(bound)}"'
                out.append(f"{self.name}_bucket{_labels(self.label_names, labels, le)} {running}")
            out.append(f"{self.name}_sum{_labels(self.label_names, labels)} {_number(totals[0])}")
            out.append(f"{self.name}_count{_labels(self.label_names, labels)} {running}")
        return out


class Gauge(_Metric):
    """A value read when the metrics are rendered (``read`` returns label values → value)."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        lock: threading.Lock,
        read: Callable[[], Iterable[tuple[LabelValues, float]]],
    ) -> None:
        super().__init__(name, help, labels, lock)
        self.read = read

    def lines(self) -> list[str]:
        try:
            items = list(self.read())
        except Exception:  # a metric must never break /metrics
            return []
        return [f"{self.name}{_labels(self.label_names, k)} {_number(v)}" for k, v in items]


class Registry:
    """All metrics of one service; :meth:`render` is the body of ``GET /metrics``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: list[_Metric] = []

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        m = Counter(name, help, labels, self._lock)
        self._metrics.append(m)
        return m

    def histogram(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        m = Histogram(name, help, labels, self._lock, buckets)
        self._metrics.append(m)
        return m

    def gauge(
        self,
        name: str,
        help: str,
        read: Callable[[], Iterable[tuple[LabelValues, float]]],
        labels: Sequence[str] = (),
    ) -> Gauge:
        m = Gauge(name, help, labels, self._lock, read)
        self._metrics.append(m)
        return m

    def render(self) -> str:
        lines: list[str] = []
        for m in self._metrics:
            if isinstance(m, Gauge):
                body = m.lines()  # reads outside the lock: callbacks may take their own locks
            else:
                with self._lock:
                    body = m.lines()
            lines += m.header() + body
        return "\n".join(lines) + "\n"


class ServiceMetrics:
    """The named series the service updates."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.requests = r.counter(
            "metaclaw_http_requests_total", "HTTP requests served.", ("route", "method", "status")
        )
        self.request_seconds = r.histogram(
            "metaclaw_http_request_duration_seconds",
            "Time to the end of the response (streams included).",
            ("route",),
        )
        self.injections = r.counter(
            "metaclaw_injections_total",
            "before_call decisions: injected (a block), empty (nothing fit) or degraded.",
            ("framework", "result"),
        )
        self.injected_skills = r.counter(
            "metaclaw_injected_skills_total", "Skills injected into prompts.", ("framework",)
        )
        self.inject_seconds = r.histogram(
            "metaclaw_inject_duration_seconds", "Time to choose and render skills.", ("framework",)
        )
        self.captures = r.counter(
            "metaclaw_captures_total",
            "Trajectories captured (stored) or not (dropped: filtered or capture failed).",
            ("framework", "result"),
        )
        self.feedback = r.counter("metaclaw_feedback_total", "Rewards recorded.", ("source",))
        self.sessions_ended = r.counter("metaclaw_sessions_ended_total", "Sessions ended.")
        self.upstream_responses = r.counter(
            "metaclaw_proxy_upstream_responses_total",
            "Upstream answers to proxied calls, by status.",
            ("status", "stream"),
        )
        self.upstream_errors = r.counter(
            "metaclaw_proxy_upstream_errors_total",
            "Proxied calls that failed in transport (connect, timeout, broken stream).",
            ("kind",),
        )
        self.proxy_ttfb_seconds = r.histogram(
            "metaclaw_proxy_first_byte_seconds",
            "Proxy: time from request to the first upstream byte.",
            ("stream",),
        )
        self.proxy_added_seconds = r.histogram(
            "metaclaw_proxy_added_seconds",
            "Proxy: time spent before forwarding (parse, inject, serialise).",
        )


class RequestMetrics:
    """ASGI middleware: count every request and time it to its last body byte.

    Routes are labelled by their template (``/v1/skills/{name}``), never the raw path, so
    unknown paths cannot grow the series without bound.
    """

    def __init__(self, app: Any, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        recorded = False

        def record() -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.inc(label, scope.get("method", ""), str(status))
            self.metrics.request_seconds.observe(time.perf_counter() - started, label)

        async def observing_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                record()

        try:
            await self.app(scope, receive, observing_send)
        finally:
            record()
