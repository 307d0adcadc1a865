"""The slow loop wired together: backend from the plugin hook, training in a background
thread only in idle windows, the served policy; and `metaclaw train --once` end to end."""

from __future__ import annotations

import json
import shlex
import sys
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from metaclaw_core import hookimpl
from metaclaw_core.cli import app
from metaclaw_core.train.backend import SamplingParams
from metaclaw_core.train.runtime import SlowLoop
from tests.slowloop.conftest import FakeBackend, answer_index_reward, capture_calls, train_settings
from tests.slowloop.fake_tinker import FakeTinkerServer
from tests.slowloop.test_scheduler import ManualSignal


class FakeBackendPlugin:
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    @hookimpl
    def metaclaw_training_backend(self, settings: Any) -> FakeBackend | None:
        return self.backend if settings.train.backend == "fake" else None


def _wait(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_slow_loop_trains_in_windows_and_serves_what_it_trained(
    make_engine: Any, settings: Any
) -> None:
    backend = FakeBackend()
    train_settings(settings, backend="fake")
    settings.schedule.poll_interval_s = 0.05
    engine = make_engine(settings, plugins=[FakeBackendPlugin(backend)])
    capture_calls(engine, ["a", "b", "c", "d"])
    user = ManualSignal("user", "present")
    loop = SlowLoop(
        engine, reward=answer_index_reward, signals=[user, ManualSignal("agent", "away")]
    )
    assert loop.backend is backend  # found through metaclaw_training_backend
    assert engine.serving_policy is loop.policy  # replay validation's default model
    loop.start()
    assert loop.policy is not None
    _wait(lambda: loop.policy is not None and loop.policy.ready)  # base weights served at once
    time.sleep(0.3)
    assert backend.batches == []  # the user is present: no training
    user.state = "away"
    _wait(lambda: loop.trainer.step_count >= 2)
    _wait(lambda: loop.policy is not None and loop.policy.current().label == "sampler-000002")
    answer = loop.policy.complete([{"role": "user", "content": "hi"}], SamplingParams(64))
    assert answer.texts == ["answer 0 from sampler-000002"]
    # the step publishes its weights before it marks its batch consumed: wait for the mark
    _wait(lambda: loop.status()["buffer"]["query"] == 0)
    assert loop.status()["step"] == 2
    loop.close()
    assert engine.serving_policy is None
    assert "save:step-000002" in backend.events and backend.events[-1] == "close"


def test_unknown_backend_name_is_a_clear_error(make_engine: Any, settings: Any) -> None:
    from metaclaw_core.errors import ConfigError

    settings.train.backend = "nope"
    engine = make_engine(settings)
    with pytest.raises(ConfigError, match="no training backend named 'nope'"):
        SlowLoop(engine)


def test_train_once_cli_runs_a_step_on_tinker(
    make_engine: Any, settings: Any, monkeypatch: Any
) -> None:
    pytest.importorskip("tinker")
    engine = make_engine(settings)
    capture_calls(engine, ["plan", "review"])
    engine.close()
    check = f"{sys.executable} -c " + shlex.quote(
        "import json,sys; t=json.load(sys.stdin); "
        "sys.exit(0 if t['output']['text'].endswith(('s0','s2')) else 1)"
    )
    with FakeTinkerServer() as server:
        env = {
            "METACLAW_HOME": str(settings.home),
            "METACLAW_TRAIN__BACKEND": "tinker",
            "METACLAW_TRAIN__BASE_MODEL": "Fake/Model-1B",
            "METACLAW_TRAIN__TOKENIZER": "bytes",
            "METACLAW_TRAIN__TINKER_BASE_URL": server.base_url,
            "METACLAW_TRAIN__GROUP_SIZE": "4",
            "METACLAW_REWARDS__CHECK_COMMAND": check,
            "TINKER_API_KEY": "tml-fake",
            "METACLAW_LOAD_ENTRYPOINTS": "false",
        }
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        result = CliRunner().invoke(app, ["train", "--once", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["status"] == "trained" and report["step"] == 1
        assert report["checkpoint"] is None  # the step is saved when the command ends
        status = json.loads(CliRunner().invoke(app, ["train", "status", "--json"]).output)
        assert status["buffer"]["consumed"] == 2
        assert status["last_checkpoint"]["step"] == 1
        assert status["last_checkpoint"]["path"].startswith("tinker://")


def test_metaclaw_serve_with_training_enabled_answers_from_the_policy(settings: Any) -> None:
    """`metaclaw serve` (a real process) starts the slow loop and proxies to its policy."""
    import os
    import re
    import subprocess

    import httpx

    pytest.importorskip("tinker")
    with FakeTinkerServer() as server:
        env = {
            **os.environ,
            "METACLAW_HOME": str(settings.home),
            "METACLAW_SERVICE__PORT": "0",
            "METACLAW_EMBEDDING__PRELOAD": "false",
            "METACLAW_TRAIN__ENABLED": "true",
            "METACLAW_TRAIN__BACKEND": "tinker",
            "METACLAW_TRAIN__BASE_MODEL": "Fake/Model-1B",
            "METACLAW_TRAIN__TOKENIZER": "bytes",
            "METACLAW_TRAIN__TINKER_BASE_URL": server.base_url,
            "TINKER_API_KEY": "tml-fake",
            "TINKER_TELEMETRY": "0",
        }
        exe = os.path.join(os.path.dirname(sys.executable), "metaclaw")
        proc = subprocess.Popen([exe, "serve"], env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            found = re.search(r"serving on (http://\S+)", line)
            assert found, line
            url = found.group(1)
            deadline = time.monotonic() + 60
            while True:
                resp = httpx.post(
                    f"{url}/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                    timeout=30,
                )
                if resp.status_code != 503 or time.monotonic() > deadline:
                    break
                assert resp.json()["error"]["code"] == "policy_not_ready"
                time.sleep(0.2)
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["choices"][0]["message"]["content"] == "w0 s0"
            assert body["system_fingerprint"].startswith("sampler-base@")
            assert resp.headers["x-metaclaw-call-id"]  # through the proxy: captured
        finally:
            proc.terminate()
            proc.wait(60)
        assert proc.returncode == 0
