"""Suite validation, multiple-choice scoring, file checks (time-out, no network), workspace
confinement."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from metaclaw_core.bench.scoring import (
    feedback_text,
    network_isolation,
    parse_bbox,
    run_check,
    score_multi_choice,
)
from metaclaw_core.bench.suite import Round, SuiteError, load_suite
from metaclaw_core.bench.workspace import Workspace
from tests.bench.suites import day01, write_suite

BENCH_SMALL = Path(__file__).resolve().parents[3] / "shared" / "data" / "metaclaw-bench-small"


def test_tiny_suite_loads(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "s"))
    assert [d.id for d in suite.days] == ["day01", "day02"]
    assert suite.rounds == 3
    r1, r2 = suite.days[0].rounds
    assert r1.type == "file_check" and r1.command.startswith("python scripts/check_iso.py")
    assert r2.answer == ("A", "C") and set(r2.options) == {"A", "B", "C"}
    ws = suite.fresh_workspace(tmp_path / "ws")
    assert (ws / "scripts" / "check_iso.py").is_file() and (ws / "day01" / "notes.txt").is_file()


@pytest.mark.skipif(not BENCH_SMALL.is_dir(), reason="../shared/data/metaclaw-bench-small absent")
def test_the_papers_small_suite_loads() -> None:
    suite = load_suite(BENCH_SMALL)
    assert len(suite.days) == 12 and suite.rounds == 61
    kinds = [r.type for d in suite.days for r in d.rounds]
    assert kinds.count("multi_choice") == 25 and kinds.count("file_check") == 36


def _break(root: Path, day: dict, how: str) -> None:
    path = root / "eval" / "day01" / "questions.json"
    if how == "json":
        path.write_text('{"rounds": [\n  {"id": "r1",,}\n]}')
    else:
        path.write_text(json.dumps(day))


@pytest.mark.parametrize(
    ("how", "mutate", "message"),
    [
        ("json", None, "questions.json:2: not valid JSON"),
        ("obj", lambda d: d["rounds"][0].update(type="essay"), "unknown type 'essay'"),
        (
            "obj",
            lambda d: d["rounds"][1]["eval"].update(answer=["Z"]),
            "options that do not exist: ['Z']",
        ),
        ("obj", lambda d: d["rounds"][0]["eval"].pop("command"), "eval.command must be"),
        ("obj", lambda d: d["rounds"][0].update(question=""), "'question' must be"),
        ("obj", lambda d: d.update(rounds=[]), "no rounds"),
    ],
)
def test_malformed_suites_name_the_file_and_the_problem(
    tmp_path: Path, how: str, mutate, message: str
) -> None:
    root = write_suite(tmp_path / "s")
    day = day01()
    if mutate:
        mutate(day)
    _break(root, day, how)
    with pytest.raises(SuiteError) as err:
        load_suite(root)
    assert message in str(err.value)
    assert "day01" in str(err.value)


def test_missing_parts_of_a_suite(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="not a directory"):
        load_suite(tmp_path / "nope")
    root = write_suite(tmp_path / "s")
    (root / "eval" / "day02" / "questions.json").unlink()
    with pytest.raises(SuiteError, match=r"day02/questions.json: missing"):
        load_suite(root)


def test_bbox_parsing_and_the_papers_score() -> None:
    assert parse_bbox("I think \\bbox{A, E}.") == ("A", "E")
    assert parse_bbox("first \\bbox{B} then \\bbox{c,a}") == ("A", "C")  # the last box counts
    assert parse_bbox("bbox{D}") == ("D",)
    assert parse_bbox("A and E") is None
    rnd = Round(
        id="r",
        type="multi_choice",
        question="q",
        feedback={"correct": "yes", "options": {"B": "B is wrong.", "C": "C is right."}},
        options={k: k for k in "ABCDEF"},
        answer=("A", "C"),
    )
    assert score_multi_choice(rnd, "\\bbox{A,C}").score == 1.0
    s = score_multi_choice(rnd, "\\bbox{A,B}")  # one false positive, one false negative
    assert s.score == pytest.approx(1 - 2 / 6)
    assert "wrong B" in s.detail and "missed C" in s.detail
    assert feedback_text(rnd, s) == "Not quite. B (B): B is wrong. C (C): C is right."
    none = score_multi_choice(rnd, "A and C")
    assert none.score == 0.0 and "no \\bbox" in none.detail
    assert feedback_text(rnd, score_multi_choice(rnd, "\\bbox{C,A}")) == "yes"


def _check(command: str, expect: int = 0) -> Round:
    return Round(
        id="r", type="file_check", question="q", feedback={}, command=command, expect_exit=expect
    )


def test_file_checks_pass_fail_and_keep_output(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hi")
    ok = run_check(_check("test -f f.txt && python -c 'print(42)'"), tmp_path)
    assert ok.score == 1.0 and "42" in ok.detail
    bad = run_check(_check("echo nope >&2; exit 3"), tmp_path)
    assert bad.score == 0.0 and "exit 3, expected 0" in bad.detail and "nope" in bad.detail
    assert run_check(_check("exit 3", expect=3), tmp_path).score == 1.0


def test_a_hanging_check_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    started = time.monotonic()
    s = run_check(_check(f"(sleep 5; touch {marker}) & sleep 60"), tmp_path, timeout_s=1)
    assert s.score == 0.0 and "timed out after 1 s" in s.detail
    assert time.monotonic() - started < 30
    time.sleep(5.5)
    assert not marker.exists(), "a child of the check outlived the time-out"


@pytest.mark.skipif(not network_isolation(), reason="unshare --net is not permitted here")
def test_checks_run_without_network(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    probe = f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
    try:
        assert run_check(_check(probe), tmp_path, isolate_network=False).score == 1.0
        s = run_check(_check(probe), tmp_path)
        assert s.score == 0.0 and ("unreachable" in s.detail or "refused" in s.detail)
    finally:
        server.close()


def test_the_workspace_confines_every_path(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "day01").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path, root / "link")
    ws = Workspace(root)
    assert ws.write_file("day01/a.json", '{"x": 1}').startswith("wrote")
    assert ws.write_file("/day01/b.json", "{}").startswith("wrote")  # "/" means the workspace
    assert (root / "day01" / "b.json").is_file()
    for path in ("../evil.txt", "link/evil.txt", str(tmp_path / "evil.txt")):
        assert ws.write_file(path, "x").startswith("error:"), path
    assert not (tmp_path / "evil.txt").exists()
    assert ws.read_file("../secret.txt").startswith("error:")
    assert ws.read_file("link/secret.txt").startswith("error:")
    assert ws.log.wrote_outside == ["../evil.txt", "link/evil.txt", str(tmp_path / "evil.txt")]
    assert [e["kind"] for e in ws.log.escapes].count("read") == 2
    assert "day01/a.json" in ws.list_files()
    assert len(ws.log.actions) == 8
