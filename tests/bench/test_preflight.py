"""Never a silent zero: a bench run with its model down does not start (a clear error, exit
status 1), and one whose model stops answering stops instead of scoring zeros."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from metaclaw_core.bench.agent import ModelConfig
from metaclaw_core.bench.preflight import ModelEndpointError, failed_on_model
from metaclaw_core.bench.runner import BenchRun, RunConfig
from metaclaw_core.bench.suite import load_suite
from metaclaw_core.cli import app
from tests.bench.suites import day01, day02, write_suite
from tests.support.scripted_openai import Reply, ScriptedOpenAI, error_reply


def _dead_url() -> str:
    server = ScriptedOpenAI().start()
    url = server.base_url
    server.stop()  # nothing listens there any more
    return url


def _config(url: str) -> RunConfig:
    return RunConfig(
        mode="baseline",
        model=ModelConfig(model="scripted-model", base_url=url, timeout_s=5),
        check_timeout_s=10,
    )


def test_a_run_whose_model_is_down_does_not_start(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite"))
    run_dir = tmp_path / "run"
    with pytest.raises(ModelEndpointError, match=r"does not answer.*nothing was run"):
        BenchRun(suite, run_dir, _config(_dead_url())).run()
    assert not (run_dir / "days").exists()


def test_the_cli_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite")
    got = CliRunner().invoke(
        app,
        [
            "bench",
            "run",
            str(suite),
            "--mode",
            "baseline",
            "--base-url",
            _dead_url(),
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert got.exit_code == 1
    assert "does not answer" in got.output


def test_rounds_that_keep_failing_on_the_model_stop_the_run(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [day01(), day02()]))
    run_dir = tmp_path / "run"
    # /models answers (the check passes), every chat completion fails: the server broke.
    with ScriptedOpenAI(default=error_reply(503, "overloaded", type="server_error")) as server:
        bench = BenchRun(suite, run_dir, _config(server.base_url), max_model_failures=2)
        with pytest.raises(ModelEndpointError, match=r"2 rounds in a row.*failed on the model"):
            bench.run()
    assert (run_dir / "days" / "day01" / "r1.json").exists()
    assert not (run_dir / "days" / "day01" / "day.json").exists()  # the day is not complete


def test_a_wrong_answer_is_the_task_failing_not_the_model() -> None:
    assert not failed_on_model(None, 1)
    assert not failed_on_model("agent stopped after 8 steps", 8)
    assert failed_on_model("APIConnectionError: Connection error.", 0)
    assert failed_on_model("InternalServerError: Error code: 503 - overloaded", 1)
    assert failed_on_model("OpenAIAPIError: Error code: 503 - overloaded", 0)


def test_a_model_that_answers_runs_as_before(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [day01()]))
    with ScriptedOpenAI(default=Reply("\\bbox{A,C}")) as server:
        summary = BenchRun(suite, tmp_path / "run", _config(server.base_url)).run()
    assert summary["days_complete"] == 1
